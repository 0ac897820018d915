#!lua
-- claim.lua: CLAIM, and the fused CLAIM+START when a nonce is given.
--
-- KEYS[1]  record key
-- ARGV[1]  owner (32 raw bytes)    ARGV[2]  operation ID
-- ARGV[3]  fingerprint (32 raw bytes)       ARGV[4]  codec
-- ARGV[5]  policy revision         ARGV[6]  lease in ms
-- ARGV[7]  failure retention in ms: the key outlives the lease by it
-- ARGV[8]  nonce (16 raw bytes; "" = plain CLAIM)
-- ARGV[9]  served: a reading of Redis' own clock, in µs, as TIME
--          returned it to the store ("" = unbounded)
-- ARGV[10] budget in µs: the claim refuses itself (LATE) once Redis'
--          clock has passed ARGV[9] plus it (bound.go)
--
-- Replies, checked in this order (the seed's order); the record is in
-- every reply but LATE, CORRUPT and the fast path's ACQUIRED:
--   LATE                      Redis ran the claim after the latest moment
--                             its caller gave it (ARGV[9] plus ARGV[10]):
--                             nothing read, nothing changed
--   COMPLETED_REPLAY          COMPLETED with our fingerprint, codec and policy:
--                             resp (joined from its chunks), and a record of
--                             only the fields a replay reads (state, attempt,
--                             rev, codec, policy, createdAt, sum)
--   CORRUPT                   the stored record breaks the schema; nothing changed
--   ACQUIRED                  no record: created in CLAIMED (EXECUTING with nonce)
--   FINGERPRINT_MISMATCH      another request used this scope; nothing changed
--   CODEC_MISMATCH            COMPLETED, but stored codec/policy differ from ours
--   AWAITING_DECISION         ABANDONED
--   OPERATION_FAILED          FAILED: a decision failed the operation for good
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

-- A bounded claim that Redis runs after its caller stopped waiting for it
-- refuses itself, so that a claim's fate is settled at its deadline.
local served, budget = ARGV[9], ARGV[10]
local t = nil
@bound(t, served, budget)

-- The fast paths run before the helpers are defined (Redis runs a script's
-- top level on every call: each helper is a closure made anew).
--
-- A new key, the common case of a claim: nothing to read or check. The
-- record is created as the slow path below would create it (the same
-- fields, in the same order), and the reply carries no record: the caller
-- knows it, as it holds every value written but the time, which the reply
-- gives (redisstore's decodeClaim builds it).
if redis.call('EXISTS', key) == 0 then
  t = t or redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local lease, nonce = tonumber(ARGV[6]), ARGV[8]
  local ttl = lease + tonumber(ARGV[7])
  local nows, lease_until = string.format('%d', now), string.format('%d', now + lease)
  -- The fields in the order @scanexec reads an EXECUTING record by.
  if nonce == '' then
    local m = @packm(state = 'CLAIMED', attempt = '1', rev = '1', policy = policy, createdAt = nows, updatedAt = nows, codec = codec)
    redis.call('HSET', key, 'o', owner, 'op', op, 'f', fp, 'l', lease_until, 'm', m)
  else
    local m = @packm(state = 'EXECUTING', attempt = '1', rev = '1', policy = policy, createdAt = nows, updatedAt = nows, codec = codec)
    redis.call('HSET', key, 'o', owner, 'op', op, 'f', fp, 'l', lease_until, 'n', nonce, 'm', m)
  end
  redis.call('PEXPIRE', key, ttl)
  return R.ACQUIRED .. '\0' .. nows .. '\0' .. string.format('%d', ttl) .. '\0'
end

-- The replay fast path reads only
-- what a replay needs. (The store replays a clean COMPLETED match with one
-- HMGET and no script; it sends the claim when that read had a doubt.) A
-- record whose m is not clean, or that has none, goes on to load, which
-- names what is wrong.
local v = redis.call('HMGET', key, 'f', 'm', 'resp', 'resp2', 'resp3', 'resp4')
if v[1] == fp and v[2] then
  local state, attempt, rev, pol, created, updated, unc, sum, cod = @metamatch(v[2])
  if state == 'COMPLETED' and cod == codec and pol == policy and sum ~= '' and
      @metaclean(state, attempt, rev, pol, created, updated, unc, sum, cod) then
    -- The chunks in hand (up to 4) are whole but the last, with none after
    -- a missing one; a longer response has more.
    local resp, bad = v[3], nil
    if resp then
      for i = 4, 6 do
        if v[i] and (not v[i - 1] or #v[i - 1] ~= 64) then
          bad = 'resp' .. (i - 2)
          break
        end
      end
    else
      bad = 'resp'
    end
    if resp and v[4] and not bad then
      if not v[5] then
        resp = resp .. v[4]
      elseif not v[6] then
        resp = resp .. v[4] .. v[5]
      else
        local out = {resp, v[4], v[5], v[6]}
        for _, c in ipairs(@restchunks(key, 5)) do
          if not c then break end
          out[#out + 1] = c
        end
        resp = table.concat(out)
      end
    end
    local pttl = redis.call('PTTL', key)
    if bad then return R.CORRUPT .. '\0' .. 0 .. '\0' .. pttl .. '\0' .. bad end
    return {R.COMPLETED_REPLAY .. '\0' .. 0 .. '\0' .. pttl .. '\0' ..
      @pack(state = state, attempt = attempt, rev = rev, codec = cod, policy = pol, createdAt = created, sum = sum), resp}
  end
end
--@prelude
local lease, retention, nonce = tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]

local now = now_ms()
local target = 'CLAIMED'
if nonce ~= '' then target = 'EXECUTING' end
local lease_until = int(now + lease)
local ttl = lease + retention

local r, resp, bad = load(key, owner, op, fp, nonce, codec, policy)
if bad then return corrupt(key, now, bad) end

if not r then
  -- No record: never here, since the fast path above made it; kept as
  -- its twin, what the full path writes for a new key.
  r = {state = target, owner = owner, attempt = '1', rev = '1', op = op, fp = fp,
    codec = codec, policy = policy, leaseUntil = lease_until, createdAt = int(now), updatedAt = int(now)}
  local set = {'o', owner, 'op', op, 'f', fp, 'l', lease_until}
  if nonce ~= '' then
    r.nonce = nonce
    set[#set + 1], set[#set + 2] = 'n', nonce
  end
  save(key, r, set)
  redis.call('PEXPIRE', key, ttl)
  return reply(R.ACQUIRED, key, now, r, ttl)
end

if r.fp ~= fp then return reply(R.FINGERPRINT_MISMATCH, key, now, r) end
if r.state == 'COMPLETED' then
  -- Our fingerprint: the fast path replays it, unless the key was made or
  -- changed between its read and load's (a script runs alone, so never).
  if r.codec == codec and r.policy == policy then return reply(R.COMPLETED_REPLAY, key, now, r, nil, resp) end
  return reply(R.CODEC_MISMATCH, key, now, r)
end
if r.state == 'ABANDONED' then return reply(R.AWAITING_DECISION, key, now, r) end
if r.state == 'FAILED' then return reply(R.OPERATION_FAILED, key, now, r) end

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
    save(key, r, {'l', r.leaseUntil})
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
  local set = {'o', owner, 'op', op, 'l', lease_until}
  local drop = {}
  if nonce ~= '' then
    r.nonce = nonce
    set[#set + 1], set[#set + 2] = 'n', nonce
  elseif r.nonce then
    r.nonce = false
    drop[#drop + 1] = 'n'
  end
  if r.reason then
    r.reason = false
    drop[#drop + 1] = 'r'
  end
  r.sum = false
  if #drop > 0 then redis.call('HDEL', key, unpack(drop)) end
  save(key, r, set)
  redis.call('PEXPIRE', key, ttl)
  return reply(R.TAKEN_OVER, key, now, r, ttl, nil, from)
end

return reply(R.IN_PROGRESS, key, now, r)
