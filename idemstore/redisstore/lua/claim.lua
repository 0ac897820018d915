#!lua
-- claim.lua: CLAIM, and the fused CLAIM+START when a nonce is given.
--
-- KEYS[1]  record key
-- ARGV[1]  owner (64 hex)          ARGV[2]  operation ID
-- ARGV[3]  fingerprint             ARGV[4]  codec
-- ARGV[5]  policy revision         ARGV[6]  lease in ms
-- ARGV[7]  key TTL in ms           ARGV[8]  nonce ("" = plain CLAIM)
--
-- Replies, checked in this order (the seed's order):
--   CORRUPT                   the stored record does not decode; nothing changed
--   ACQUIRED                  no record: created in CLAIMED (EXECUTING with nonce)
--   FINGERPRINT_MISMATCH      another request used this scope; nothing changed
--   CODEC_MISMATCH            COMPLETED, but stored codec/policy differ from ours
--   COMPLETED_REPLAY          COMPLETED: the reply carries resp and the PTTL
--   RECOVERY_REQUIRED         ABANDONED
--   REPLAYED_ACQUIRE          same owner and op: state and nonce tell how far it got
--   OWNER_OPERATION_CONFLICT  same owner, another op
--   TAKEN_OVER                FAILED_RETRYABLE or an expired lease: attempt+1,
--                             rev+1, new owner; _from is the state taken over and
--                             uncertain=1 when an EXECUTING lease expired
--   IN_PROGRESS               another owner's lease is live
local key = KEYS[1]
local owner, op, fp, codec = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local policy, lease, ttl, nonce = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]
local target = 'CLAIMED'
if nonce ~= '' then target = 'EXECUTING' end

local now = now_ms()
local r, bad = load(key)
if bad then return corrupt(key, now, bad) end

if not r then
  redis.call('HSET', key, 'state', target, 'owner', owner, 'attempt', 1, 'rev', 1,
    'op', op, 'fp', fp, 'codec', codec, 'policy', policy, 'leaseUntil', now + lease,
    'uncertain', '0', 'createdAt', now, 'updatedAt', now)
  if nonce ~= '' then redis.call('HSET', key, 'nonce', nonce) end
  redis.call('PEXPIRE', key, ttl)
  return reply('ACQUIRED', key, now)
end

if r.fp ~= fp then return reply('FINGERPRINT_MISMATCH', key, now) end

if r.state == 'COMPLETED' then
  if r.codec ~= codec or r.policy ~= policy then return reply('CODEC_MISMATCH', key, now) end
  return reply('COMPLETED_REPLAY', key, now, true)
end

if r.state == 'ABANDONED' then return reply('RECOVERY_REQUIRED', key, now) end

if r.owner == owner then
  if r.op == op then return reply('REPLAYED_ACQUIRE', key, now) end
  return reply('OWNER_OPERATION_CONFLICT', key, now)
end

if r.state == 'FAILED_RETRYABLE' or r.leaseUntil <= now then
  local uncertain = '0'
  if r.state == 'EXECUTING' or r.uncertain == '1' then uncertain = '1' end
  redis.call('HSET', key, 'state', target, 'owner', owner, 'attempt', r.attempt + 1,
    'rev', r.rev + 1, 'op', op, 'codec', codec, 'policy', policy,
    'leaseUntil', now + lease, 'uncertain', uncertain, 'updatedAt', now)
  redis.call('HDEL', key, 'reason', 'resp')
  if nonce ~= '' then
    redis.call('HSET', key, 'nonce', nonce)
  else
    redis.call('HDEL', key, 'nonce')
  end
  redis.call('PEXPIRE', key, ttl)
  return reply('TAKEN_OVER', key, now, false, {_from = r.state})
end

return reply('IN_PROGRESS', key, now)
