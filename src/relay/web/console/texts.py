"""The Account page's own-texts section: an account's SMS and email texts per locale.

Set and deleted through `AccountTexts`, as `relay accounts template` does. The
texts apply to both modes, so a test-key session (whose key is the one most
often shared) sees them but changes nothing: a live-key session edits its own
account's, an admin session any account's. WhatsApp sends the template Meta
approved, so only SMS and email texts exist.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from relay.accounts.template_store import AccountTemplate
from relay.errors import RelayError, ResourceMissing
from relay.ids import is_id
from relay.sms.custom import CUSTOM_CHANNELS, MAX_LENGTH
from relay.web.console.auth import Console, Refused, acting
from relay.web.console.pages import HEADERS, button_form, csrf_field, e, page, table
from relay.web.console.session import Session
from relay.web.errors import status_and_type


def may_edit(session: Session, account_id: str) -> bool:
    if session.is_admin:
        return True
    return bool(session.livemode) and session.account_id == account_id


async def section(console: Console, session: Session, account_id: str) -> str:
    """The texts of `account_id`, with the forms the session may use."""
    texts = await console.services.texts.list(account_id)
    editable = may_edit(session, account_id)
    rows = [_row(session, text, editable) for text in texts]
    listed = (
        table(["Channel", "Locale", "Text", "Updated", ""], rows, raw=True)
        if rows
        else "<p class=muted>None: Relay's own words in every language.</p>"
    )
    intro = (
        '<h2 id="texts">Own texts</h2><p>The SMS or email text of this account in one'
        " locale, used instead of Relay's: <code>{code}</code> and <code>{brand}</code>"
        " required, <code>{minutes}</code> (minutes the code stays valid) allowed. An SMS"
        f" text may take at most {console.services.texts.max_segments} segments with the"
        " longest brand and code. A text for <code>pt</code> serves <code>pt-BR</code>"
        " too, unless there is one for <code>pt-BR</code>. WhatsApp sends the template"
        " Meta approved.</p>"
    )
    if not editable:
        return intro + listed + "<p class=muted>A live-key or admin session edits them.</p>"
    return intro + listed + _set_form(session, account_id)


def _row(session: Session, text: AccountTemplate, editable: bool) -> list[str]:
    delete = ""
    if editable:
        fields = {"account_id": text.account_id, "channel": text.channel, "locale": text.locale}
        delete = button_form("/console/texts/delete", session, "Delete", fields)
    shown = f'<pre data-text="{e(text.channel)}-{e(text.locale)}">{e(text.text)}</pre>'
    if not text.in_use:
        shown += '<p class="muted not-sent">Not sent: it does not name {brand}; set it again.</p>'
    return [e(text.channel), e(text.locale), shown, e(text.updated_at), delete]


def _set_form(session: Session, account_id: str) -> str:
    options = "".join(f'<option value="{c}">{c}</option>' for c in CUSTOM_CHANNELS)
    return (
        '<form method="post" action="/console/texts/set" id="set-text">'
        f'{csrf_field(session)}<input type="hidden" name="account_id" value="{e(account_id)}">'
        f'<label>Channel <select name="channel" id="text-channel">{options}</select></label> '
        '<label>Locale <input type="text" name="locale" id="text-locale" placeholder="fr, pt-BR"'
        ' required maxlength="35"></label><br>'
        f'<textarea name="text" id="text-text" rows="3" cols="70" maxlength="{MAX_LENGTH["email"]}"'
        ' placeholder="Your {brand} code is {code}. It expires in {minutes} minutes."></textarea>'
        '<br><button type="submit" id="save-text">Save text</button></form>'
    )


async def set_text(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    account_id = _allowed(session, fields.get("account_id", ""))
    try:
        saved = await console.services.texts.set(
            account_id,
            channel=fields.get("channel", ""),
            locale=fields.get("locale", ""),
            text=fields.get("text", ""),
        )
    except RelayError as problem:
        return _refused(session, problem, account_id)
    done = f"Saved the {saved.template.channel} text for {saved.template.locale}."
    if saved.warning is not None:
        done += f" Warning: {saved.warning}."
    return _back(session, account_id, done)


async def delete_text(console: Console, request: Request) -> Response:
    session, fields = await acting(console, request)
    account_id = _allowed(session, fields.get("account_id", ""))
    channel, locale = fields.get("channel", ""), fields.get("locale", "")
    try:
        await console.services.texts.delete(account_id, channel=channel, locale=locale)
    except RelayError as problem:
        return _refused(session, problem, account_id)
    return _back(session, account_id, f"Deleted the {channel} text for {locale}.")


def account_url(session: Session, account_id: str) -> str:
    return (
        f"/console/account?account={quote(account_id)}" if session.is_admin else "/console/account"
    )


def _allowed(session: Session, account_id: str) -> str:
    if not is_id(account_id, "acct"):
        raise Refused(_refused(session, ResourceMissing("Name an account id (acct_…)."), ""))
    if may_edit(session, account_id):
        return account_id
    why = (
        "Own texts apply to live and test messages alike: a live-key or admin session"
        " changes them, or `relay accounts template`."
    )
    back = f'<p><a href="{e(account_url(session, account_id))}#texts">Back to the account</a></p>'
    raise Refused(page("Refused", _error_box(why, None, None) + back, session=session, status=403))


def _refused(session: Session, problem: RelayError, account_id: str) -> Response:
    """The API contract's error, as the page shows it: code, param and message."""
    status, kind = status_and_type(problem)
    box = _error_box(problem.message, problem.code, problem.param, kind)
    back = f'<p><a href="{e(account_url(session, account_id))}#texts">Back to the account</a></p>'
    return page("Refused", box + back, session=session, status=status)


def _error_box(message: str, code: str | None, param: str | None, kind: str = "") -> str:
    parts = [
        f'<dt>type</dt><dd id="error-type">{e(kind)}</dd>' if kind else "",
        f'<dt>code</dt><dd id="error-code">{e(code)}</dd>' if code else "",
        f'<dt>param</dt><dd id="error-param">{e(param)}</dd>' if param else "",
        f'<dt>message</dt><dd id="error-message">{e(message)}</dd>',
    ]
    return f'<dl class="refusal" role="alert">{"".join(parts)}</dl>'


def _back(session: Session, account_id: str, message: str) -> Response:
    url = account_url(session, account_id)
    joiner = "&" if "?" in url else "?"
    return RedirectResponse(f"{url}{joiner}done={quote(message)}#texts", 303, headers=HEADERS)
