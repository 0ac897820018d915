#!lua
-- renew.lua: RENEW, a script of its own, for one lease or several. (The
-- seed renewed through TRANSITION with EXECUTING -> EXECUTING, which stops
-- at "already at target" and never extends anything.) Every lease is
-- fenced on its own: a renewal of several is the same as each renewed by
-- a call of its own, in KEYS' order, at one server time.
--
-- KEYS[1]  record key of the first lease (KEYS[i]: of the i-th)
-- ARGV[1]  owner                   ARGV[2]  operation ID
-- ARGV[3]  nonce                   ARGV[4]  lease in ms
-- ARGV[5]  failure retention in ms: the key outlives the lease by it
-- (the first lease's; the i-th's five are ARGV[5i-4] to ARGV[5i])
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
--                   leaseUntil and nonce
local out, slow, now = {}, nil, nil

-- The fast path: the record as the caller's own start left it (renewals
-- move leaseUntil alone). One HGETALL reads every field, which proves the
-- record holds no other (no reason, no response chunk, no field of the
-- layout before m); what the caller holds (owner, op, nonce) is compared
-- by equality and the rest checked by the rules load checks them by (fp
-- and leaseUntil by their patterns, m by one match). Anything else goes
-- on to the full path below, which reads and checks the whole record,
-- decides, and names a corrupt field. It writes and answers what the full
-- path writes and answers for the same record. The server's TIME is read
-- once, for every lease of the call.
for i = 1, #KEYS do
  local key, a = KEYS[i], 5 * i
  local owner, op, nonce = ARGV[a - 4], ARGV[a - 3], ARGV[a - 2]
  local v = redis.call('HGETALL', key)
  @scanexec(v)
  local fast = false
  if e_n == 7 and e_state == 'EXECUTING' and e_owner == owner and e_op == op and e_nonce == nonce and
      e_fp and not @invalid(fp, e_fp) and e_leaseUntil and not @invalid(leaseUntil, e_leaseUntil) and e_m then
    local attempt, rev, policy, created, updated, unc, sum, codec = @metamatch(e_m)
    if attempt and @metaclean(attempt, rev, policy, created, updated, unc, sum, codec) then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      local lease_until = tonumber(e_leaseUntil)
      local lease = tonumber(ARGV[a - 1])
      if now + lease > lease_until then
        lease_until = now + lease
        e_leaseUntil = string.format('%d', lease_until)
        redis.call('HSET', key, 'leaseUntil', e_leaseUntil)
      end
      local ttl = lease_until - now
      if ttl < 0 then ttl = 0 end
      ttl = ttl + tonumber(ARGV[a])
      redis.call('PEXPIRE', key, ttl)
      out[i] = R.RENEWED .. '\0' .. string.format('%d', now) .. '\0' .. string.format('%d', ttl) .. '\0\0' .. @pack(state = 'EXECUTING', owner = owner,
        attempt = attempt, rev = rev, op = op, leaseUntil = e_leaseUntil, nonce = nonce)
      fast = true
    end
  end
  if not fast then
    slow = slow or {}
    slow[#slow + 1] = i
  end
end
if not slow then return out end
--@prelude

-- The full path reads the whole record (one HMGET of the fields stored by
-- name and m, one pattern match for m, HLEN), so a corrupt record is
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
    redis.call('HSET', key, 'leaseUntil', r.leaseUntil)
  end
  local ttl = in_flight_ttl(lease_until, now, retention)
  redis.call('PEXPIRE', key, ttl)
  -- The renewer needs the lease: the reply carries the fields that say whose.
  return R.RENEWED .. '\0' .. now .. '\0' .. ttl .. '\0\0' .. @pack(state = r.state, owner = r.owner,
    attempt = r.attempt, rev = r.rev, op = r.op, leaseUntil = r.leaseUntil, nonce = r.nonce)
end

for _, i in ipairs(slow) do
  local a = 5 * i
  out[i] = renew(KEYS[i], ARGV[a - 4], ARGV[a - 3], ARGV[a - 2], tonumber(ARGV[a - 1]), tonumber(ARGV[a]))
end
return out
