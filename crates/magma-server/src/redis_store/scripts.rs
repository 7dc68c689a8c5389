//! The Lua scripts the Redis store runs: each decision about a session is
//! one script, so that it is atomic against every other replica's.
//!
//! Keys, under the store's prefix `P`: `P s:{run_id}`, a hash (`config`:
//! the compact JSON the first `PUT` sent; `digest`: SHA-256 of the
//! configuration in a canonical form, so that configurations equal by the
//! reference's `==` compare equal; `state`: `open` or `closing`; `gen`: a
//! random token per session, telling a reopened run id from the session
//! before it; `bytes`: what the session counts against the byte budget;
//! `closer`, `lease`: the `DELETE` that closes it and until when it counts
//! as alive); `P f:{run_id}`, a sorted set of the requests in flight, each
//! scored by the end of its lease (the replica that runs it renews it);
//! `P sessions`, a sorted set of run ids scored by last use (0 once
//! closing); `P bytes`, the sum of the sessions' `bytes`.
//!
//! Times are Redis's own clock (`TIME`), so replicas' clocks never meet.
//! The sweep reaches session keys it derives from the run ids it reads,
//! which a single Redis (not Redis Cluster) allows.

/// Functions every script starts with.
const PRELUDE: &str = r#"
if redis.replicate_commands then redis.replicate_commands() end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The requests of in-flight set f whose lease has not ended at now.
local function live(f, now)
  redis.call('ZREMRANGEBYSCORE', f, '-inf', now)
  return redis.call('ZCARD', f)
end
-- Removes a session and gives its bytes back.
local function remove(s, f, sessions, bytes, run)
  local b = tonumber(redis.call('HGET', s, 'bytes') or '0')
  redis.call('DEL', s, f)
  redis.call('ZREM', sessions, run)
  if b > 0 then redis.call('DECRBY', bytes, b) end
end
"#;

/// `PUT`: KEYS s, f, sessions, bytes; ARGV run, digest, needed, max count,
/// max bytes, gen (empty: only look), config. Answers `same gen`,
/// `conflict`, `full`, `over held`, `absent` (looked only) or `new gen`.
/// A closing session whose closer's lease ended with nothing in flight is
/// finished first.
pub(crate) const OPEN: &str = r#"
local now = now_ms()
local s, f, sessions, bytes = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local v = redis.call('HMGET', s, 'state', 'lease')
local state = v[1]
if state == 'closing' and tonumber(v[2] or '0') < now and live(f, now) == 0 then
  remove(s, f, sessions, bytes, ARGV[1])
  state = false
end
if state == 'open' then
  if redis.call('HGET', s, 'digest') == ARGV[2] then
    redis.call('ZADD', sessions, 'XX', now, ARGV[1])
    return {'same', redis.call('HGET', s, 'gen')}
  end
  return {'conflict'}
elseif state then
  return {'conflict'}
end
if redis.call('ZCARD', sessions) >= tonumber(ARGV[4]) then return {'full'} end
local held = tonumber(redis.call('GET', bytes) or '0')
if held + tonumber(ARGV[3]) > tonumber(ARGV[5]) then return {'over', tostring(held)} end
if ARGV[6] == '' then return {'absent'} end
redis.call('HSET', s, 'config', ARGV[7], 'digest', ARGV[2], 'state', 'open', 'gen', ARGV[6],
  'bytes', ARGV[3])
redis.call('INCRBY', bytes, ARGV[3])
redis.call('ZADD', sessions, now, ARGV[1])
return {'new', ARGV[6]}
"#;

/// `POST`: KEYS s, f; ARGV member, lease (ms). Nil when the session is
/// unknown or closing; else its `gen` (the configuration is fetched apart,
/// one at a time, by a replica that has not prepared this generation).
pub(crate) const HOLD: &str = r#"
local now = now_ms()
local v = redis.call('HMGET', KEYS[1], 'state', 'gen')
if v[1] ~= 'open' then return false end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
return {v[2]}
"#;

/// A request's end: KEYS f, s, sessions; ARGV member, run, gen.
pub(crate) const RELEASE: &str = r#"
redis.call('ZREM', KEYS[1], ARGV[1])
local v = redis.call('HMGET', KEYS[2], 'state', 'gen')
if v[1] == 'open' and v[2] == ARGV[3] then
  redis.call('ZADD', KEYS[3], 'XX', now_ms(), ARGV[2])
end
return 1
"#;

/// Renews leases: KEYS f1..fn; ARGV lease (ms), member1..membern.
pub(crate) const REFRESH: &str = r#"
local deadline = now_ms() + tonumber(ARGV[1])
for i = 1, #KEYS do
  redis.call('ZADD', KEYS[i], 'XX', deadline, ARGV[i + 1])
end
return #KEYS
"#;

/// `DELETE`: KEYS s, sessions; ARGV run, token, lease (ms). Nil when there
/// is no session; `closer gen` when this token closes it (an open session,
/// this token's own, or one whose closer's lease ended); else `waiter gen`.
pub(crate) const CLOSE: &str = r#"
local now = now_ms()
local v = redis.call('HMGET', KEYS[1], 'state', 'gen', 'closer', 'lease')
if not v[1] then return false end
if v[1] == 'open' or v[3] == ARGV[2] or tonumber(v[4] or '0') < now then
  redis.call('HSET', KEYS[1], 'state', 'closing', 'closer', ARGV[2],
    'lease', now + tonumber(ARGV[3]))
  redis.call('ZADD', KEYS[2], 'XX', 0, ARGV[1])
  return {'closer', v[2]}
end
return {'waiter', v[2]}
"#;

/// The closer's wait: KEYS s, f; ARGV gen, token, lease (ms). The requests
/// in flight (the closer's lease renewed), or -1 when this token no longer
/// closes this session.
pub(crate) const IN_FLIGHT: &str = r#"
local now = now_ms()
local v = redis.call('HMGET', KEYS[1], 'gen', 'closer')
if v[1] ~= ARGV[1] or v[2] ~= ARGV[2] then return -1 end
redis.call('HSET', KEYS[1], 'lease', now + tonumber(ARGV[3]))
return live(KEYS[2], now)
"#;

/// The closer's end: KEYS s, f, sessions, bytes; ARGV run, gen, token.
pub(crate) const FINISH: &str = r#"
local v = redis.call('HMGET', KEYS[1], 'gen', 'closer')
if v[1] ~= ARGV[2] or v[2] ~= ARGV[3] then return 0 end
remove(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1])
return 1
"#;

/// The sweep: KEYS sessions, bytes; ARGV prefix, idle (ms, 0: never),
/// limit. Removes open sessions idle that long with nothing in flight
/// (answered as `run, idle ms` pairs) and closing ones whose closer's lease
/// ended with nothing in flight.
pub(crate) const EXPIRE: &str = r#"
local now = now_ms()
local idle = tonumber(ARGV[2])
local cutoff = 0
if idle > 0 then cutoff = now - idle end
local out = {}
local runs = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', cutoff, 'WITHSCORES',
  'LIMIT', 0, tonumber(ARGV[3]))
for i = 1, #runs, 2 do
  local run, score = runs[i], tonumber(runs[i + 1])
  local s, f = ARGV[1] .. 's:' .. run, ARGV[1] .. 'f:' .. run
  local v = redis.call('HMGET', s, 'state', 'lease')
  if not v[1] then
    redis.call('ZREM', KEYS[1], run)
  elseif v[1] == 'open' then
    if idle > 0 then
      if live(f, now) == 0 then
        remove(s, f, KEYS[1], KEYS[2], run)
        out[#out + 1] = run
        out[#out + 1] = tostring(now - score)
      else
        redis.call('ZADD', KEYS[1], 'XX', now, run)
      end
    end
  elseif tonumber(v[2] or '0') < now and live(f, now) == 0 then
    remove(s, f, KEYS[1], KEYS[2], run)
  end
end
return out
"#;

/// `body` with the prelude.
pub(crate) fn script(body: &str) -> redis::Script {
    redis::Script::new(&format!("{PRELUDE}{body}"))
}
