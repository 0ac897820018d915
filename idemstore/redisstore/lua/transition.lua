#!lua
-- transition.lua: TRANSITION (start, complete, fail).
--
-- KEYS[1]  record key
-- ARGV[1]  owner (raw)             ARGV[2]  operation ID
-- ARGV[3]  expected rev            ARGV[4]  target state
-- ARGV[5]  allowed source states, comma separated
-- ARGV[6]  nonce (raw): recorded when the target is EXECUTING, required to
--          match the stored one when the source is EXECUTING
-- ARGV[7]  lease in ms, for EXECUTING ("" otherwise)
-- ARGV[8]  with a lease: the failure retention in ms (the key lives for the
--          lease plus it); without: the key's TTL in ms
-- ARGV[9]  "1" to store ARGV[10] as resp and ARGV[11] as its checksum
-- ARGV[10] response payload        ARGV[11] its CRC-32C, 8 hex
-- ARGV[12] reason ("" = none)
-- ARGV[13] m as the caller's start left it ("" = not known): compared,
--          never written
-- ARGV[14] fingerprint (raw) the caller's start left (with ARGV[13])
-- ARGV[15] with ARGV[13], a COMPLETE's m up to its update: 'COMPLETED',
--          attempt, rev+1, policy and creation of ARGV[13], each followed
--          by ':'
-- ARGV[16] with ARGV[13], a COMPLETE's m after its update: ':0:', the
--          checksum, ':', the codec of ARGV[13]
-- ARGV[17] served: a reading of Redis' own clock, in µs, as TIME
--          returned it to the store ("" = unbounded)
-- ARGV[18] budget in µs: the transition refuses itself (LATE) once
--          Redis' clock has passed ARGV[17] plus it (bound.go)
--
-- Replies, checked in this order (the seed's order):
--   LATE            Redis ran the transition after the latest moment its
--                   caller gave it (ARGV[17] plus ARGV[18]): nothing read,
--                   nothing changed
--   CORRUPT         the stored record breaks the schema; nothing changed
--   NOT_FOUND       no record
--   NOT_OWNER       another owner holds the record
--   OP_CONFLICT     same owner, another operation
--   ALREADY         already at the target (a re-sent transition): the
--                   stored nonce says which invocation got there
--   STALE_REV       the revision moved on
--   WRONG_STATE     not in an allowed source state
--   NONCE_MISMATCH  EXECUTING under another invocation's nonce
--   TRANSITIONED    applied: state, rev+1, updatedAt; EXECUTING records the
--                   nonce and the lease; COMPLETED stores resp (in chunks
--                   of 64 bytes up to 2 KiB, whole above) and sum and
--                   clears uncertain; FAILED_RETRYABLE clears uncertain; the
--                   terminal states drop leaseUntil and keep the reason.
--                   A COMPLETE that found the record equal to what the
--                   caller sent (ARGV[13], ARGV[14]) answers without the
--                   record: the caller holds it
local key = KEYS[1]
local owner, op, rev, target = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local sources, nonce, lease, ttl = ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8])

-- A bounded transition that Redis runs after its caller stopped waiting
-- for it refuses itself: its fate is settled at its deadline.
local served, budget = ARGV[17], ARGV[18]
local t = nil
@bound(t, served, budget)

-- The fast path: a COMPLETE by the invocation that started the record,
-- found as its own start left it (renewals move leaseUntil alone). It
-- compares by equality what the caller holds (owner, op, nonce, rev, and
-- fp and m when it sends them) and checks the rest by the rules load
-- checks them by (leaseUntil by its pattern; fp and m, when the caller
-- does not send them, by their patterns and one match), with one
-- HGETALL, which also proves the record holds no other field: no reason,
-- no response chunk, nothing that is not the record's. The values compared
-- by equality were checked by the caller (redisstore sends them only as
-- it packed them from a record it decoded and checked, whose rev is the
-- one it sends), so a record equal to them keeps every rule. Anything
-- else (another state, owner, nonce or rev, a field that breaks its rule,
-- one field more or less) goes on to the full path below, which reads and
-- checks the whole record, decides, and names a corrupt field; so does
-- any other transition. What it writes is what the full path writes for
-- the same record, and so is what it answers, or, when fp and m were
-- compared, the same without the record.
if target == 'COMPLETED' and sources == 'EXECUTING' and ARGV[9] == '1' and ARGV[12] == '' then
  local v = redis.call('HGETALL', key)
  @scanexec(v)
  local held, by = ARGV[13], nil
  local state, attempt, mrev, policy, created, updated, unc, sum, codec
  if e_n == 6 and e_owner == owner and e_op == op and e_nonce == nonce and
      e_leaseUntil and not @invalid(leaseUntil, e_leaseUntil) and e_m then
    if held ~= '' then
      -- held is EXECUTING's m (redisstore packs it only from such a record).
      if e_m == held and e_fp == ARGV[14] then by = 'held' end
    elseif e_fp and not @invalid(fp, e_fp) then
      state, attempt, mrev, policy, created, updated, unc, sum, codec = @metamatch(e_m)
      if state == 'EXECUTING' and sum == '' and tonumber(mrev) == rev and
          @metaclean(state, attempt, mrev, policy, created, updated, unc, sum, codec) then
        by = 'rules'
      end
    end
  end
  if by then
    t = t or redis.call('TIME')
    local nows = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
    local nrev, m = string.format('%d', rev + 1), nil
    if by == 'held' then
      m = ARGV[15] .. nows .. ARGV[16]
    else
      m = @packm(state = 'COMPLETED', attempt = attempt, rev = nrev, policy = policy, createdAt = created, updatedAt = nows, sum = ARGV[11], codec = codec)
    end
    local set = {'m', m}
    @chunkresp(set, ARGV[10])
    redis.call('HDEL', key, 'l')
    redis.call('HSET', key, unpack(set))
    redis.call('PEXPIRE', key, ttl)
    local out = R.TRANSITIONED .. '\0' .. nows .. '\0' .. string.format('%d', ttl) .. '\0'
    if by == 'held' then return out end
    return {out .. @pack(state = 'COMPLETED', owner = owner, attempt = attempt, rev = nrev, op = op, fp = e_fp, codec = codec, policy = policy, nonce = nonce, createdAt = created, updatedAt = nows, sum = ARGV[11])}
  end
end
--@prelude

local now = now_ms()
local r, resp, bad = load(key, owner, op, nil, nonce)
if bad then return corrupt(key, now, bad) end
if not r then return not_found(now) end
if r.owner ~= owner then return reply(R.NOT_OWNER, key, now, r) end
if r.op ~= op then return reply(R.OP_CONFLICT, key, now, r) end
if r.state == target then return reply(R.ALREADY, key, now, r) end
if tonumber(r.rev) ~= rev then return reply(R.STALE_REV, key, now, r) end
if not string.find(',' .. sources .. ',', ',' .. r.state .. ',', 1, true) then
  return reply(R.WRONG_STATE, key, now, r)
end
if r.state == 'EXECUTING' and r.nonce ~= nonce then return reply(R.NONCE_MISMATCH, key, now, r) end

r.state, r.rev, r.updatedAt = target, int(rev + 1), int(now)
-- One HSET of every field set (m, with the state, and the response's
-- chunks).
local set = {}
if ARGV[12] ~= '' then
  r.reason = ARGV[12]
  set[#set + 1], set[#set + 2] = 'r', r.reason
end
if target == 'EXECUTING' then
  r.nonce, r.leaseUntil = nonce, int(now + tonumber(lease))
  ttl = tonumber(lease) + ttl
  set[#set + 1], set[#set + 2], set[#set + 3], set[#set + 4] = 'n', nonce, 'l', r.leaseUntil
  save(key, r, set)
else
  -- The terminal states keep no lease; COMPLETED and FAILED_RETRYABLE
  -- settle any uncertainty (in m).
  if r.leaseUntil then redis.call('HDEL', key, 'l') end
  r.leaseUntil = false
  if target == 'COMPLETED' or target == 'FAILED_RETRYABLE' then r.uncertain = false end
  if ARGV[9] == '1' then
    r.sum = ARGV[11]
    save(key, r, set, ARGV[10])
  else
    save(key, r, set)
  end
end
redis.call('PEXPIRE', key, ttl)
return reply(R.TRANSITIONED, key, now, r, ttl)
