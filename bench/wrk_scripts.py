"""wrk's Lua for the HTTP benchmarks: the request shapes, pacing and the one line of results.

A script is put together by `script()`: the key and content type, the request
shape (SHAPES), the call's own requests, optional pacing, and the statistics
line bench/verify_bench.py parses.

The two request shapes of a create and a check:

* `keyed`, what production sends: relay-client (clients/python) adds an
  `Idempotency-Key` to every POST, `rc_` and 32 hex digits, one per request.
  Here each key is a random part drawn per request (spreading the keys over
  the index as UUID4s do), a prefix random per run and per wrk thread, and the
  thread's counter: unique within a run and across the runs on one database.
* `bare`: no `Idempotency-Key`, the shape no client sends, kept beside it.

GETs never carry the header, as with relay-client.
"""

from __future__ import annotations

import secrets

# Measured in this order on each server: the headline shape last, so it is
# not the one that meets the smaller tables.
SHAPES = ("bare", "keyed")

# Every call's `request()` asks `request_headers()` for the headers of the next
# request: nil means wrk.headers as set at the top of the script.
LUA_BARE = """
local function request_headers()
  return nil
end
"""

# wrk.format() replaces wrk.headers when given a table, so the table starts as
# a copy of them; the key is rewritten in place for every request.
LUA_KEYED = """
local keyed_headers = nil
local keyed_sent = 0
local function request_headers()
  if keyed_headers == nil then
    keyed_headers = {}
    for name, value in pairs(wrk.headers) do keyed_headers[name] = value end
  end
  keyed_sent = keyed_sent + 1
  keyed_headers["Idempotency-Key"] = string.format(
    "rc_%08x%s%02x%08x", math.random(0, 2147483647), "{prefix}", (tid or 0) % 256, keyed_sent)
  return keyed_headers
end
"""

# Every script: number the threads, and print one parseable line of results.
LUA_STATS = """
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function done(summary, latency, requests)
  local late = 0
  for _, thread in ipairs(threads) do late = late + (thread:get("late") or 0) end
  local errors = summary.errors
  io.write(string.format(
    'BENCH {"requests": %d, "duration_us": %d, "non_2xx": %d, "socket_errors": %d, '
      .. '"p50_us": %d, "p95_us": %d, "p99_us": %d, "late": %d}\\n',
    summary.requests, summary.duration, errors.status,
    errors.connect + errors.read + errors.write + errors.timeout,
    latency:percentile(50), latency:percentile(95), latency:percentile(99), late))
end
"""

LUA_PACING = """
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]]
local clock = ffi.new("bench_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, clock)  -- 1: CLOCK_MONOTONIC
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end
local interval_ms = {interval_ms}
local start_ms = {start_ms}
local next_slot = nil
late = 0
function delay()
  local now = now_ms()
  local slot = next_slot or (now + start_ms)
  if slot < now then
    if now - slot > interval_ms then late = late + 1 end
    slot = now
  end
  next_slot = slot + interval_ms
  return math.floor(slot - now + 0.5)
end
"""

LUA_AUTH = """
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {key}"
"""

# Keeps the ids it is answered with, for the check, retrieve and list runs.
LUA_CREATE = """
wrk.method = "POST"
local ids_out = io.open("{ids}", "a")
ids_out:setvbuf("full")
local kept = 0
function init(args)
  math.randomseed({seed} + tid)
end
function request()
  local body = '{{"to": "+1415' .. math.random(2000000, 9999999) .. '"}}'
  return wrk.format(nil, nil, request_headers(), body)
end
function response(status, headers, body)
  local id = body:match('"id"%s*:%s*"([^"]+)"')
  if id then
    ids_out:write(id, "\\n")
    kept = kept + 1
    if kept % 64 == 0 then ids_out:flush() end
  end
end
"""

# A create that lands on a number with a pending verification is a resend and
# answers that verification's id again: keep each id once.
LUA_IDS = """
local ids, seen = {{}}, {{}}
for line in io.lines("{ids}") do
  if not seen[line] then
    seen[line] = true
    ids[#ids + 1] = line
  end
end
"""

LUA_CHECK = (
    LUA_IDS
    + """
wrk.method = "POST"
local sent = 0
function request()
  local k = sent * {threads} + tid
  sent = sent + 1
  -- Blocks of {spread} ids, each block checked {uses} times over: an id's next check
  -- comes {spread} requests after its last, never beside it in flight, as a person's
  -- second try follows the first.
  local block = math.floor(k / ({spread} * {uses}))
  local id = ids[({start} + block * {spread} + k % {spread}) % #ids + 1]
  return wrk.format(nil, nil, request_headers(), '{{"id": "' .. id .. '", "code": "123456"}}')
end
"""
)

LUA_RETRIEVE = (
    LUA_IDS
    + """
function init(args)
  math.randomseed({seed} + tid)
end
function request()
  return wrk.format("GET", "/v1/verifications/" .. ids[math.random(#ids)])
end
"""
)


def shape_lua(shape: str, prefix: str | None = None) -> str:
    """The `request_headers()` of `shape`; `prefix`: 14 hex digits, random when not given."""
    if shape == "bare":
        return LUA_BARE
    if shape != "keyed":
        raise ValueError(f"unknown request shape: {shape}")
    prefix = secrets.token_hex(7) if prefix is None else prefix
    if len(prefix) != 14 or any(char not in "0123456789abcdef" for char in prefix):
        raise ValueError("the key prefix is 14 lowercase hex digits")
    return LUA_KEYED.replace("{prefix}", prefix)


def pacing_lua(interval_ms: float, start_ms: int) -> str:
    return LUA_PACING.replace("{interval_ms}", repr(interval_ms)).replace(
        "{start_ms}", str(start_ms)
    )


def script(key: str, body: str, *, shape: str = "bare", pacing: str = "") -> str:
    """One wrk script: auth, the shape's headers, the call's `body`, pacing, statistics."""
    return LUA_AUTH.format(key=key) + shape_lua(shape) + body + pacing + LUA_STATS
