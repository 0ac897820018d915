#!lua
-- claim.lua: CLAIM, and the fused CLAIM+START when a nonce is given.
--
-- KEYS[1]  record key
-- ARGV[1]  owner (64 hex)          ARGV[2]  operation ID
-- ARGV[3]  fingerprint             ARGV[4]  codec
-- ARGV[5]  policy revision         ARGV[6]  lease in ms
-- ARGV[7]  failure retention in ms: the key outlives the lease by it
-- ARGV[8]  nonce ("" = plain CLAIM)
--
-- Replies, checked in this order (the seed's order); the record is in
-- every reply but CORRUPT:
--   COMPLETED_REPLAY          COMPLETED with our fingerprint, codec and policy:
--                             resp, and a record of only the fields a replay
--                             reads (state, attempt, rev, codec, policy, sum)
--   CORRUPT                   the stored record breaks the schema; nothing changed
--   ACQUIRED                  no record: created in CLAIMED (EXECUTING with nonce)
--   FINGERPRINT_MISMATCH      another request used this scope; nothing changed
--   CODEC_MISMATCH            COMPLETED, but stored codec/policy differ from ours
--   RECOVERY_REQUIRED         ABANDONED
--   OWNER_OPERATION_CONFLICT  same owner, another op
--   REPLAYED_ACQUIRE          same owner and op, and either FAILED_RETRYABLE, or
--                             a live lease, or EXECUTING under this very nonce
--                             (a re-sent claim+start: its lease is refreshed).
--                             State and nonce tell how far it got.
--   TAKEN_OVER                FAILED_RETRYABLE or an expired lease: rev+1, our
--                             owner, nonce and lease; attempt+1 when the owner
--                             changes (an earlier invocation of the same owner
--                             whose lease expired is dead: it is fenced by the
--                             rev). extra is the state taken over; uncertain=1
--                             when an EXECUTING lease expired, and it stays 1
--                             until settled
--   IN_PROGRESS               another owner's lease is live
local key = KEYS[1]
local owner, op, fp, codec, policy = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local lease, retention, nonce = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]

-- The replay fast path reads only what a replay needs.
local v = redis.call('HMGET', key, 'state', 'fp', 'codec', 'policy', 'attempt', 'rev', 'sum', 'resp')
if v[1] == 'COMPLETED' and v[2] == fp and v[3] == codec and v[4] == policy then
  if not valid('attempt', v[5]) then return corrupt(key, 0, 'attempt') end
  if not valid('rev', v[6]) then return corrupt(key, 0, 'rev') end
  if not valid('sum', v[7]) then return corrupt(key, 0, 'sum') end
  if not v[8] then return corrupt(key, 0, 'resp') end
  local r = {state = v[1], attempt = v[5], rev = v[6], codec = v[3], policy = v[4], sum = v[7]}
  return reply(R.COMPLETED_REPLAY, key, 0, r, nil, v[8])
end

local now = now_ms()
local target = 'CLAIMED'
if nonce ~= '' then target = 'EXECUTING' end
local lease_until = int(now + lease)
local ttl = lease + retention

if not v[1] then
  -- No state: no record, unless other fields are there (corrupt).
  if redis.call('EXISTS', key) == 1 then return corrupt(key, now, 'state') end
  local r = {state = target, owner = owner, attempt = '1', rev = '1', op = op, fp = fp,
    codec = codec, policy = policy, leaseUntil = lease_until, createdAt = int(now), updatedAt = int(now)}
  local names = {'state', 'owner', 'attempt', 'rev', 'op', 'fp', 'codec', 'policy', 'leaseUntil',
    'createdAt', 'updatedAt'}
  if nonce ~= '' then r.nonce = nonce; names[#names + 1] = 'nonce' end
  save(key, r, names)
  redis.call('PEXPIRE', key, ttl)
  return reply(R.ACQUIRED, key, now, r, ttl)
end

local r, resp, bad = load(key)
if bad then return corrupt(key, now, bad) end

if r.fp ~= fp then return reply(R.FINGERPRINT_MISMATCH, key, now, r) end
if r.state == 'COMPLETED' then
  -- Our fingerprint, so another codec or policy (the fast path replays ours).
  return reply(R.CODEC_MISMATCH, key, now, r)
end
if r.state == 'ABANDONED' then return reply(R.RECOVERY_REQUIRED, key, now, r) end

local expired = r.state == 'FAILED_RETRYABLE' or tonumber(r.leaseUntil) <= now
local same = r.owner == owner
if same then
  if r.op ~= op then return reply(R.OWNER_OPERATION_CONFLICT, key, now, r) end
  if r.state == 'FAILED_RETRYABLE' then return reply(R.REPLAYED_ACQUIRE, key, now, r) end
  if r.state == 'EXECUTING' and r.nonce == nonce then
    -- This invocation's own claim+start, re-sent: its reply never arrived,
    -- so nothing ran under it. Refresh the lease it asked for.
    if tonumber(r.leaseUntil) < now + lease then r.leaseUntil = lease_until end
    r.updatedAt = int(now)
    local t = in_flight_ttl(tonumber(r.leaseUntil), now, retention)
    save(key, r, {'leaseUntil', 'updatedAt'})
    redis.call('PEXPIRE', key, t)
    return reply(R.REPLAYED_ACQUIRE, key, now, r, t)
  end
  if not expired then return reply(R.REPLAYED_ACQUIRE, key, now, r) end
end

if expired then
  local from = r.state
  if from == 'EXECUTING' then r.uncertain = '1' end
  if not same then r.attempt = int(tonumber(r.attempt) + 1) end
  r.state, r.owner, r.rev, r.op = target, owner, int(tonumber(r.rev) + 1), op
  r.codec, r.policy, r.leaseUntil, r.updatedAt = codec, policy, lease_until, int(now)
  r.reason, r.sum = false, false
  if nonce ~= '' then r.nonce = nonce else r.nonce = false end
  save(key, r, {'state', 'owner', 'attempt', 'rev', 'op', 'codec', 'policy', 'leaseUntil',
    'updatedAt', 'uncertain', 'nonce', 'reason', 'sum'})
  redis.call('PEXPIRE', key, ttl)
  return reply(R.TAKEN_OVER, key, now, r, ttl, nil, from)
end

return reply(R.IN_PROGRESS, key, now, r)
