#!lua
-- transition.lua: TRANSITION (start, complete, fail).
--
-- KEYS[1]  record key
-- ARGV[1]  owner                   ARGV[2]  operation ID
-- ARGV[3]  expected rev            ARGV[4]  target state
-- ARGV[5]  allowed source states, comma separated
-- ARGV[6]  nonce: recorded when the target is EXECUTING, required to match
--          the stored one when the source is EXECUTING
-- ARGV[7]  lease in ms ("" = leave leaseUntil)
-- ARGV[8]  key TTL in ms
-- ARGV[9]  "1" to store ARGV[10] as resp
-- ARGV[10] response payload
-- ARGV[11] reason ("" = none)
--
-- Replies, checked in this order (the seed's order):
--   NOT_FOUND       no record
--   CORRUPT         the stored record does not decode
--   NOT_OWNER       another owner holds the record
--   OP_CONFLICT     same owner, another operation
--   ALREADY         already at the target (a re-sent transition): the
--                   stored nonce says which invocation got there
--   STALE_REV       the revision moved on
--   WRONG_STATE     not in an allowed source state
--   NONCE_MISMATCH  EXECUTING under another invocation's nonce
--   TRANSITIONED    applied: state, rev+1, updatedAt, and the optional
--                   nonce, leaseUntil, resp, reason; PEXPIRE
local key = KEYS[1]
local owner, op, rev, target = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local sources, nonce, lease, ttl = ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8])

local now = now_ms()
local r, bad = load(key)
if bad then return corrupt(key, now, bad) end
if not r then return reply('NOT_FOUND', key, now) end
if r.owner ~= owner then return reply('NOT_OWNER', key, now) end
if r.op ~= op then return reply('OP_CONFLICT', key, now) end
if r.state == target then return reply('ALREADY', key, now) end
if r.rev ~= rev then return reply('STALE_REV', key, now) end
if not string.find(',' .. sources .. ',', ',' .. r.state .. ',', 1, true) then
  return reply('WRONG_STATE', key, now)
end
if r.state == 'EXECUTING' and r.nonce ~= nonce then return reply('NONCE_MISMATCH', key, now) end

redis.call('HSET', key, 'state', target, 'rev', r.rev + 1, 'updatedAt', now)
if target == 'EXECUTING' then redis.call('HSET', key, 'nonce', nonce) end
if lease ~= '' then redis.call('HSET', key, 'leaseUntil', now + tonumber(lease)) end
if ARGV[9] == '1' then redis.call('HSET', key, 'resp', ARGV[10]) end
if ARGV[11] ~= '' then redis.call('HSET', key, 'reason', ARGV[11]) end
if target == 'COMPLETED' or target == 'FAILED_RETRYABLE' then
  redis.call('HSET', key, 'uncertain', '0')
end
redis.call('PEXPIRE', key, ttl)
return reply('TRANSITIONED', key, now)
