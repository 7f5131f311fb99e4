"""The Keys page: an account's API keys, never a secret, and a form for each action.

A key session sees its own account's keys in its own mode, with forms to revoke its
own key or narrow its ranges only (the others are listed read-only), and no form to
create or roll one; an admin names the account (`?account=acct_…`), sees both modes
and every form. Which form is shown is decided by `relay.accounts.authority`, as the
actions themselves (`key_actions.py`) are.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from relay.accounts.access import MAX_OVERLAP
from relay.accounts.authority import KeyAction, may_manage
from relay.accounts.models import ApiKey
from relay.clock import isoformat
from relay.ids import is_id
from relay.web.console.auth import Console, current
from relay.web.console.pages import csrf_field, e, notice, page, refusal
from relay.web.console.session import Session

_HEADINGS = ("Key", "Id", "Mode", "State", "Networks", "Last used", "Last refused", "Actions")


def state_text(key: ApiKey) -> str:
    if key.state == "rolling" and key.expires_at is not None:
        return f"rolling until {isoformat(key.expires_at)}"
    return key.state


def networks_text(key: ApiKey) -> str:
    return "any" if key.networks is None else ", ".join(key.networks)


def refused_text(key: ApiKey) -> str:
    if key.last_refused_at is None:
        return "never"
    return f"{isoformat(key.last_refused_at)}: {key.last_refused_reason}"


def keys_url(account_id: str | None, session: Session) -> str:
    return (
        f"/console/keys?account={account_id}"
        if session.is_admin and account_id
        else ("/console/keys")
    )


async def keys_page(console: Console, request: Request) -> Response:
    session = await current(console, request)
    done = request.query_params.get("done", "")
    body = notice(done) if done else ""
    if session.is_admin:
        account_id = request.query_params.get("account", "")
        body += _account_form(account_id)
        if not is_id(account_id, "acct"):
            return page("Keys", body, session=session, here="keys")
    else:
        assert session.account_id is not None
        account_id = session.account_id
    keys = await console.services.accounts.list_keys(account_id)
    if not session.is_admin:
        keys = [k for k in keys if k.livemode == session.livemode]
    if not keys:
        body += refusal(f"No keys for {account_id}.")
        return page("Keys", body, session=session, here="keys", status=404)
    body += (
        f"<p>Account <code>{e(account_id)}</code>. Secrets are shown once, when a key is"
        " created or rolled; only their last four characters are kept in view.</p>"
        + _table(session, keys)
        + _create_form(session, account_id)
    )
    return page("Keys", body, session=session, here="keys")


def _table(session: Session, keys: list[ApiKey]) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in _HEADINGS)
    rows = "".join(_row(session, key) for key in keys)
    return f'<table id="keys"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _row(session: Session, key: ApiKey) -> str:
    own = ' <span class="muted">(this session)</span>' if key.id == session.key_id else ""
    cells = (
        f'<td class="redacted"><code>{e(key.redacted)}</code>{own}</td>'
        f"<td>{e(key.id)}</td><td>{e(key.mode)}</td>"
        f'<td class="state">{e(state_text(key))}</td>'
        f'<td class="networks">{e(networks_text(key))}</td>'
        f'<td class="used">{e(key.last_used_at or "never")}</td>'
        f'<td class="refused">{e(refused_text(key))}</td>'
        f'<td class="actions">{_actions(session, key)}</td>'
    )
    return f'<tr data-key="{e(key.id)}">{cells}</tr>'


def _form(session: Session, action: str, key: ApiKey, inner: str) -> str:
    return (
        f'<form class="key-action" method="post" action="/console/keys/{action}">'
        f'{csrf_field(session)}<input type="hidden" name="key_id" value="{e(key.id)}">'
        f"{inner}</form>"
    )


def _may(session: Session, action: KeyAction, key: ApiKey | None = None) -> bool:
    return may_manage(session.kind, session.key_id, action, None if key is None else key.id)


def _actions(session: Session, key: ApiKey) -> str:
    if key.state in ("revoked", "expired"):
        return ""
    forms = []
    if key.state == "active" and _may(session, "roll", key):
        forms.append(
            _form(
                session,
                "roll",
                key,
                f'<input type="number" name="overlap" value="24" min="0" max="{MAX_OVERLAP}"'
                ' step="any" aria-label="overlap">'
                ' <select name="unit" aria-label="unit"><option value="hours">hours</option>'
                '<option value="seconds">seconds</option></select>'
                ' <button type="submit">Roll</button>',
            )
        )
    if _may(session, "restrict", key):
        forms.append(
            _form(
                session,
                "restrict",
                key,
                '<input type="text" name="networks" placeholder="10.0.0.0/8, 2001:db8::/32"'
                ' aria-label="networks"> <button type="submit">Restrict</button>',
            )
        )
    if key.networks is not None and _may(session, "widen", key):
        forms.append(
            _form(
                session,
                "restrict",
                key,
                '<input type="hidden" name="networks" value="any">'
                '<button type="submit">Lift restriction</button>',
            )
        )
    if _may(session, "revoke", key):
        forms.append(_form(session, "revoke", key, '<button type="submit">Revoke</button>'))
    if not forms:
        return '<span class="muted read-only">read-only: an admin session manages this key</span>'
    return "".join(forms)


def _create_form(session: Session, account_id: str) -> str:
    if not _may(session, "create"):
        return (
            '<p class="muted">This session may revoke the key it signed in with, or narrow'
            " the ranges it answers from. Creating or rolling a key, widening its ranges, or"
            " acting on another key needs an admin session or <code>relay keys</code>.</p>"
        )
    mode = (
        '<select name="mode" aria-label="mode"><option value="test">test</option>'
        '<option value="live">live</option></select> '
    )
    return (
        "<h2>New key</h2>"
        '<form method="post" action="/console/keys/create">'
        f'{csrf_field(session)}<input type="hidden" name="account_id" value="{e(account_id)}">'
        f'{mode}<input type="text" name="networks" id="new-networks"'
        ' placeholder="networks (optional): 10.0.0.0/8, …">'
        ' <button type="submit" id="create-key">Create key</button></form>'
        '<p class="muted">An account holds at most two unexpired keys per mode;'
        " a rolling key counts until its overlap ends.</p>"
    )


def _account_form(account_id: str) -> str:
    return (
        '<form method="get"><input type="text" name="account" placeholder="acct_…"'
        f' value="{e(account_id)}"> <button type="submit">Show keys</button></form>'
    )
