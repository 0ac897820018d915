#!lua
-- resolve.lua: RESOLVE an ABANDONED record (operator or workflow decision),
-- compare-and-set on the attempt and rev the resolver saw.
--
-- KEYS[1]  record key
-- ARGV[1]  expected attempt        ARGV[2]  expected rev
-- ARGV[3]  target: COMPLETED or FAILED_RETRYABLE
-- ARGV[4]  response (COMPLETED)    ARGV[5]  codec (COMPLETED)
-- ARGV[6]  policy (COMPLETED)      ARGV[7]  reason
-- ARGV[8]  key TTL in ms
--
-- Replies:
--   NOT_FOUND      no record
--   CORRUPT        the stored record does not decode
--   ALREADY        already resolved to the target from exactly this attempt/rev
--                  (and, for COMPLETED, with this very response)
--   STALE_ATTEMPT  the attempt moved on
--   STALE_REV      the revision moved on
--   WRONG_STATE    not ABANDONED
--   RESOLVED       applied: state, rev+1, reason, uncertain=0 (and resp,
--                  codec, policy for COMPLETED); PEXPIRE
local key = KEYS[1]
local attempt, rev, target = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local ttl = tonumber(ARGV[8])

local now = now_ms()
local r, bad = load(key)
if bad then return corrupt(key, now, bad) end
if not r then return reply('NOT_FOUND', key, now) end
if r.state == target and r.attempt == attempt and r.rev == rev + 1 and
    (target ~= 'COMPLETED' or redis.call('HGET', key, 'resp') == ARGV[4]) then
  return reply('ALREADY', key, now)
end
if r.attempt ~= attempt then return reply('STALE_ATTEMPT', key, now) end
if r.rev ~= rev then return reply('STALE_REV', key, now) end
if r.state ~= 'ABANDONED' then return reply('WRONG_STATE', key, now) end

redis.call('HSET', key, 'state', target, 'rev', r.rev + 1, 'uncertain', '0',
  'reason', ARGV[7], 'updatedAt', now)
if target == 'COMPLETED' then
  redis.call('HSET', key, 'resp', ARGV[4], 'codec', ARGV[5], 'policy', ARGV[6])
end
redis.call('PEXPIRE', key, ttl)
return reply('RESOLVED', key, now)
