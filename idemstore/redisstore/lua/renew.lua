#!lua
-- renew.lua: RENEW, a script of its own, for one lease or several. (The
-- seed renewed through TRANSITION with EXECUTING -> EXECUTING, which stops
-- at "already at target" and never extends anything.) Every lease is
-- fenced on its own: a renewal of several is the same as each renewed by
-- a call of its own, in KEYS' order, at one server time.
--
-- KEYS[1]  record key of the first lease (KEYS[i]: of the i-th)
-- ARGV[1]  owner (raw)             ARGV[2]  operation ID
-- ARGV[3]  nonce (raw)             ARGV[4]  lease in ms
-- ARGV[5]  failure retention in ms: the key outlives the lease by it
-- ARGV[6]  fingerprint (raw) the caller's start left ("" = not known)
-- ARGV[7]  m as the caller's start left it ("" = not known): compared,
--          never written
-- (the first lease's; the i-th's seven are ARGV[7i-6] to ARGV[7i])
--
-- Replies: an array, entry i the reply for lease i:
--   CORRUPT         the stored record breaks the schema; nothing changed
--   NOT_FOUND       no record
--   NOT_OWNER       another owner holds the record (lost)
--   OP_CONFLICT     same owner, another operation
--   WRONG_STATE     not EXECUTING
--   NONCE_MISMATCH  EXECUTING under another invocation
--   RENEWED         leaseUntil = max(leaseUntil, now + lease), the key's TTL
--                   = the lease left + the retention; rev is unchanged. The
--                   reply's record has only state, owner, attempt, rev, op,
--                   leaseUntil and nonce; when the record was found equal
--                   to what the caller sent (ARGV[6], ARGV[7]), the reply
--                   carries no record and extra is leaseUntil: the caller
--                   holds the rest
local out, slow, now, nows = {}, nil, nil, nil

-- The fast path: the record as the caller's own start left it (renewals
-- move leaseUntil alone). One HGETALL reads every field, which proves the
-- record holds no other (no reason, no response chunk, nothing that is
-- not the record's); what the caller holds (owner, op, nonce, and fp and
-- m when it sends them) is compared by equality, and the rest checked by
-- the rules load checks them by (leaseUntil by its pattern; fp and m, when
-- the caller does not send them, by their patterns and one match). The
-- values compared by equality were checked by the caller (redisstore
-- sends fp and m only as it packed them from a record it decoded and
-- checked), so a record equal to them keeps every rule. Anything else
-- goes on to the full path below, which reads and checks the whole
-- record, decides, and names a corrupt field. It writes what the full
-- path writes for the same record, and answers the same, or, when fp and
-- m were compared, only leaseUntil. The server's TIME is read once, for
-- every lease of the call.
for i = 1, #KEYS do
  local key, a = KEYS[i], 7 * i
  local owner, op, nonce, fp, m = ARGV[a - 6], ARGV[a - 5], ARGV[a - 4], ARGV[a - 1], ARGV[a]
  local v = redis.call('HGETALL', key)
  @scanexec(v)
  local fast, attempt, rev = false, nil, nil
  if e_n == 6 and e_owner == owner and e_op == op and e_nonce == nonce and
      e_leaseUntil and not @invalid(leaseUntil, e_leaseUntil) then
    if m ~= '' then
      -- m is EXECUTING's (redisstore packs it only from such a record).
      fast = e_fp == fp and e_m == m
    elseif e_fp and not @invalid(fp, e_fp) and e_m then
      local state, policy, created, updated, unc, sum, codec
      state, attempt, rev, policy, created, updated, unc, sum, codec = @metamatch(e_m)
      fast = state == 'EXECUTING' and @metaclean(state, attempt, rev, policy, created, updated, unc, sum, codec)
    end
  end
  if fast then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      nows = string.format('%d', now)
    end
    local lease_until = tonumber(e_leaseUntil)
    local lease = tonumber(ARGV[a - 3])
    if now + lease > lease_until then
      lease_until = now + lease
      e_leaseUntil = string.format('%d', lease_until)
      redis.call('HSET', key, 'l', e_leaseUntil)
    end
    local ttl = lease_until - now
    if ttl < 0 then ttl = 0 end
    ttl = ttl + tonumber(ARGV[a - 2])
    redis.call('PEXPIRE', key, ttl)
    if m ~= '' then
      out[i] = R.RENEWED .. '\0' .. nows .. '\0' .. string.format('%d', ttl) .. '\0' .. e_leaseUntil
    else
      out[i] = {R.RENEWED .. '\0' .. nows .. '\0' .. string.format('%d', ttl) .. '\0' .. @pack(state = 'EXECUTING', owner = owner,
        attempt = attempt, rev = rev, op = op, leaseUntil = e_leaseUntil, nonce = nonce)}
    end
  else
    slow = slow or {}
    slow[#slow + 1] = i
  end
end
if not slow then return out end
--@prelude

-- The full path reads the whole record (one HMGET of the fields stored by
-- their keys and m, one pattern match for m, HLEN), so a corrupt record is
-- refused, and writes only leaseUntil: m (updatedAt) does not change.
local function renew(key, owner, op, nonce, lease, retention)
  local now = now_ms()
  local r, resp, bad = load(key, owner, op, nil, nonce)
  if bad then return corrupt(key, now, bad) end
  if not r then return not_found(now) end
  if r.owner ~= owner then return reply(R.NOT_OWNER, key, now, r) end
  if r.op ~= op then return reply(R.OP_CONFLICT, key, now, r) end
  if r.state ~= 'EXECUTING' then return reply(R.WRONG_STATE, key, now, r) end
  if r.nonce ~= nonce then return reply(R.NONCE_MISMATCH, key, now, r) end

  local lease_until = tonumber(r.leaseUntil)
  if now + lease > lease_until then
    lease_until = now + lease
    r.leaseUntil = int(lease_until)
    redis.call('HSET', key, 'l', r.leaseUntil)
  end
  local ttl = in_flight_ttl(lease_until, now, retention)
  redis.call('PEXPIRE', key, ttl)
  -- The renewer needs the lease: the reply carries the fields that say whose.
  return {R.RENEWED .. '\0' .. now .. '\0' .. ttl .. '\0' .. @pack(state = r.state, owner = r.owner,
    attempt = r.attempt, rev = r.rev, op = r.op, leaseUntil = r.leaseUntil, nonce = r.nonce)}
end

for _, i in ipairs(slow) do
  local a = 7 * i
  out[i] = renew(KEYS[i], ARGV[a - 6], ARGV[a - 5], ARGV[a - 4], tonumber(ARGV[a - 3]), tonumber(ARGV[a - 2]))
end
return out
