#!lua
-- renew.lua: RENEW, a script of its own. (The seed renewed through
-- TRANSITION with EXECUTING -> EXECUTING, which stops at "already at
-- target" and never extends anything.)
--
-- KEYS[1]  record key
-- ARGV[1]  owner                   ARGV[2]  operation ID
-- ARGV[3]  nonce                   ARGV[4]  lease in ms
-- ARGV[5]  key TTL in ms
--
-- Replies:
--   NOT_FOUND       no record
--   CORRUPT         the stored record does not decode
--   NOT_OWNER       another owner holds the record (lost)
--   OP_CONFLICT     same owner, another operation
--   WRONG_STATE     not EXECUTING
--   NONCE_MISMATCH  EXECUTING under another invocation
--   RENEWED         leaseUntil = max(leaseUntil, now + lease), the key's TTL
--                   = max(PTTL, key TTL); rev is unchanged
local key = KEYS[1]
local owner, op, nonce = ARGV[1], ARGV[2], ARGV[3]
local lease, ttl = tonumber(ARGV[4]), tonumber(ARGV[5])

local now = now_ms()
local r, bad = load(key)
if bad then return corrupt(key, now, bad) end
if not r then return reply('NOT_FOUND', key, now) end
if r.owner ~= owner then return reply('NOT_OWNER', key, now) end
if r.op ~= op then return reply('OP_CONFLICT', key, now) end
if r.state ~= 'EXECUTING' then return reply('WRONG_STATE', key, now) end
if r.nonce ~= nonce then return reply('NONCE_MISMATCH', key, now) end

if now + lease > r.leaseUntil then
  redis.call('HSET', key, 'leaseUntil', now + lease)
end
if ttl > redis.call('PTTL', key) then redis.call('PEXPIRE', key, ttl) end
return reply('RENEWED', key, now)
