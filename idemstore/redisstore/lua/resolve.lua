#!lua
-- resolve.lua: RESOLVE an ABANDONED record (operator or workflow decision),
-- or reopen a FAILED one, compare-and-set on the attempt and rev the
-- resolver saw.
--
-- KEYS[1]  record key
-- ARGV[1]  expected attempt        ARGV[2]  expected rev
-- ARGV[3]  target: COMPLETED, FAILED_RETRYABLE or FAILED
-- ARGV[4]  response (COMPLETED)    ARGV[5]  its CRC-32C, 8 hex (COMPLETED)
-- ARGV[6]  codec (COMPLETED)       ARGV[7]  policy (COMPLETED)
-- ARGV[8]  reason                  ARGV[9]  key TTL in ms
--
-- Replies:
--   CORRUPT        the stored record breaks the schema; nothing changed
--   NOT_FOUND      no record
--   ALREADY        already resolved to the target from exactly this attempt/rev
--                  (and, for COMPLETED, with this very response)
--   STALE_ATTEMPT  the attempt moved on
--   STALE_REV      the revision moved on
--   WRONG_STATE    not ABANDONED (nor FAILED, to reopen it to FAILED_RETRYABLE)
--   RESOLVED       applied: state, rev+1, reason; uncertain and leaseUntil
--                  dropped (and resp, sum, codec, policy for COMPLETED); PEXPIRE
local key = KEYS[1]
local attempt, rev, target = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local ttl = tonumber(ARGV[9])

local now = now_ms()
local r, resp, bad = load(key)
if bad then return corrupt(key, now, bad) end
if not r then return not_found(now) end
if r.state == target and tonumber(r.attempt) == attempt and tonumber(r.rev) == rev + 1 and
    (target ~= 'COMPLETED' or (r.sum == ARGV[5] and resp == ARGV[4])) then
  return reply(R.ALREADY, key, now, r)
end
if tonumber(r.attempt) ~= attempt then return reply(R.STALE_ATTEMPT, key, now, r) end
if tonumber(r.rev) ~= rev then return reply(R.STALE_REV, key, now, r) end
if r.state ~= 'ABANDONED' and not (r.state == 'FAILED' and target == 'FAILED_RETRYABLE') then
  return reply(R.WRONG_STATE, key, now, r)
end

r.state, r.rev, r.updatedAt = target, int(rev + 1), int(now)
if r.leaseUntil or r.reason then redis.call('HDEL', key, 'l', 'r') end
r.uncertain, r.leaseUntil, r.reason = false, false, false
-- One HSET of every field set (m, with the state, and the response's
-- chunks).
local set = {}
if ARGV[8] ~= '' then
  r.reason = ARGV[8]
  set[#set + 1], set[#set + 2] = 'r', r.reason
end
if target == 'COMPLETED' then
  r.sum, r.codec, r.policy = ARGV[5], ARGV[6], ARGV[7]
  save(key, r, set, ARGV[4])
else
  save(key, r, set)
end
redis.call('PEXPIRE', key, ttl)
return reply(R.RESOLVED, key, now, r, ttl)
