"""The built-in words of an OTP, per language: the SMS body and an email's subject.

Each SMS fits one segment in its language's natural encoding with a 6-digit
code and a 20-character brand (`tests/unit/test_sms_languages.py` counts).
Languages written in the GSM-7 alphabet keep to it: a single accent outside it
(ó, ç, ã...) switches the whole SMS to UCS-2, whose 70-unit segments would
make the text cost two. Languages that leave GSM-7 anyway (Polish, Turkish,
Romanian, Vietnamese and every non-Latin script) have 70 units for the whole
message, so their wording is short: 44 units at most besides brand and code.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

SMS_TEMPLATES: Mapping[str, str] = MappingProxyType(
    {
        "en": "Your {brand} verification code is {code}. Do not share it.",
        "es": "Tu clave de seguridad de {brand} es {code}. No la compartas con nadie.",
        "fr": "Votre code de vérification {brand} est {code}. Ne le partagez avec personne.",
        "de": "Ihr Bestätigungscode für {brand} lautet {code}. Geben Sie ihn nicht weiter.",
        # "código", "verificação" and "não" are not GSM-7; "token" is the common
        # Brazilian word for a one-time code and keeps the SMS at one segment.
        "pt": "Seu token {brand} é {code}. Nunca o compartilhe com ninguém.",
        "it": "Il tuo codice di verifica {brand} è {code}. Non condividerlo con nessuno.",
        "nl": "Je verificatiecode voor {brand} is {code}. Deel deze code met niemand.",
        "sv": "Din verifieringskod för {brand} är {code}. Dela den inte med någon.",
        "id": "Kode verifikasi {brand} Anda adalah {code}. Jangan berikan ke siapa pun.",
        "pl": "Twój kod {brand} to {code}. Nie podawaj go nikomu.",
        "tr": "{brand} doğrulama kodunuz: {code}. Kimseyle paylaşmayın.",
        "ro": "Codul tău {brand} este {code}. Nu îl divulga nimănui.",
        "vi": "Mã xác thực {brand} là {code}. Không chia sẻ mã này.",
        "ru": "Ваш код {brand}: {code}. Никому его не сообщайте.",
        "uk": "Ваш код {brand}: {code}. Нікому його не повідомляйте.",
        "ar": "رمز التحقق من {brand} هو {code}. لا تشاركه مع أحد.",
        "he": "קוד האימות שלך ל-{brand} הוא {code}. אין לשתף את הקוד.",
        # Indian OTP messages say "OTP" in Hindi too; "सत्यापन कोड" would not fit.
        "hi": "आपका {brand} OTP {code} है। इसे किसी से साझा न करें।",
        "ja": "{brand}の認証コードは{code}です。このコードを誰にも教えないでください。",
        "ko": "[{brand}] 인증번호는 {code}입니다. 타인에게 알려주지 마세요.",
        "zh-Hans": "您的{brand}验证码是{code}，请勿泄露给他人。",
        "zh-Hant": "您的{brand}驗證碼是{code}，請勿提供給他人。",
        "th": "รหัสยืนยัน {brand} ของคุณคือ {code} ห้ามบอกผู้อื่น",
    }
)

# An email's subject: the code last, so that a notification's first line shows it.
SUBJECT_TEMPLATES: Mapping[str, str] = MappingProxyType(
    {
        "en": "Your {brand} verification code: {code}",
        "es": "Tu clave de seguridad de {brand}: {code}",
        "fr": "Votre code de vérification {brand} : {code}",
        "de": "Ihr Bestätigungscode für {brand}: {code}",
        "pt": "Seu código de verificação {brand}: {code}",
        "it": "Il tuo codice di verifica {brand}: {code}",
        "nl": "Je verificatiecode voor {brand}: {code}",
        "sv": "Din verifieringskod för {brand}: {code}",
        "id": "Kode verifikasi {brand} Anda: {code}",
        "pl": "Twój kod weryfikacyjny {brand}: {code}",
        "tr": "{brand} doğrulama kodunuz: {code}",
        "ro": "Codul tău de verificare {brand}: {code}",
        "vi": "Mã xác thực {brand} của bạn: {code}",
        "ru": "Ваш код подтверждения {brand}: {code}",
        "uk": "Ваш код підтвердження {brand}: {code}",
        "ar": "رمز التحقق من {brand}: {code}",
        "he": "קוד האימות שלך ל-{brand}: {code}",
        "hi": "आपका {brand} सत्यापन कोड: {code}",
        "ja": "{brand}の認証コード: {code}",
        "ko": "{brand} 인증번호: {code}",
        "zh-Hans": "您的{brand}验证码: {code}",
        "zh-Hant": "您的{brand}驗證碼: {code}",
        "th": "รหัสยืนยัน {brand} ของคุณ: {code}",
    }
)

BUILT_IN_LOCALES: tuple[str, ...] = tuple(SMS_TEMPLATES)
