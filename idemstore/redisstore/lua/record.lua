#!lua
-- record.lua: helpers shared by every onceflow script; it is not a script
-- of its own. go generate (internal/gen) puts the code generated from the
-- record schema (internal/schema: load, pack and valid, the one list of
-- field rules) and this file into each script body, replaces every
-- R.<NAME> with its reply code and writes the scripts Redis runs to
-- lua/gen/.
--
-- Reply of every script (decoded in Go by decode.go): one string
--   "<code>\0<nowMs>\0<pttlMs>\0<extra>"
--   code    the reply code (R.<NAME>)
--   nowMs   the server's TIME in ms, 0 where the script did not need it
--   pttlMs  the key's PTTL after the script ran, -2 when there is none
--   extra   TAKEN_OVER: the state taken over; CORRUPT: the field; RENEWED
--           without a record: leaseUntil; else empty
-- when the reply carries no record; when it carries one, an array
--   {"<code>\0<nowMs>\0<pttlMs>\0<extra>\0<record>", owner, fp, nonce[, resp]}
--   record  the record as the script left it (pack): every field of the
--           schema in its order, NUL-separated, '' when absent, and ''
--           for the owner, fingerprint and nonce, which follow as
--           elements of their own: the record keeps them as raw bytes,
--           which no separator can be kept out of (no other field may
--           hold a NUL)
--   resp    the stored response, where the script's header says so
-- One string, or an array of few elements: the client parses and
-- allocates one value an element.

-- Redis server time in epoch milliseconds: the only clock leases use.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- int renders an integer the way fields store it (tostring is exact below
-- 1e14, which every epoch millisecond until the year 5138 is).
local function int(n)
  if n < 1e14 then return tostring(n) end
  return string.format('%d', n)
end

-- reply builds a reply from the record as the script left it. pttl may be
-- nil: it is read then.
local function reply(code, key, now, r, pttl, resp, extra)
  if pttl == nil then pttl = redis.call('PTTL', key) end
  local head = code .. '\0' .. now .. '\0' .. pttl .. '\0' .. (extra or '')
  if r then return pack(r, head, resp) end
  return head
end

local function corrupt(key, now, field)
  return R.CORRUPT .. '\0' .. now .. '\0' .. redis.call('PTTL', key) .. '\0' .. field
end

local function not_found(now)
  return R.NOT_FOUND .. '\0' .. now .. '\0-2\0'
end

-- in_flight_ttl is the key TTL of a CLAIMED or EXECUTING record: the lease
-- left plus the failure retention, so the evidence of an attempt always
-- outlives its lease.
local function in_flight_ttl(lease_until, now, retention)
  local left = lease_until - now
  if left < 0 then left = 0 end
  return left + retention
end
