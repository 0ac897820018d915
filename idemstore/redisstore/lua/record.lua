#!lua
-- record.lua: helpers shared by every onceflow script. The store prepends
-- the generated schema (FIELDS, KIND, REQUIRED, the limits and the reply
-- codes R, rendered from schema.go) and this file to each script body; it
-- is not a script of its own.
--
-- Reply layout of every script (decoded in Go by decode.go):
--   { code, nowMs, pttlMs, record, resp, extra }
--   code    R.<NAME>, an integer
--   nowMs   the server's TIME in ms, 0 where the script did not need it
--   pttlMs  the key's PTTL after the script ran, -2 when there is no key
--   record  the record after the script ran, packed: for each of FIELDS in
--           order, "-" when absent, else "<byte length>:<value>"; false when
--           there is none
--   resp    the stored response where the script's header says so, else false
--   extra   TAKEN_OVER: the state taken over; CORRUPT: the field; else false

local STATES = {CLAIMED = true, EXECUTING = true, COMPLETED = true,
  FAILED_RETRYABLE = true, ABANDONED = true}

local function hex(n)
  return function(v) return #v == n and not string.find(v, '[^0-9a-f]') end
end

-- CHECK holds one validator per field kind; schema.go's fieldKind.valid is
-- its Go twin.
local CHECK = {
  state = function(v) return STATES[v] == true end,
  hex64 = hex(64),
  hex32 = hex(32),
  hex8 = hex(8),
  count = function(v) return #v <= MAX_DIGITS and string.find(v, '^[1-9]%d*$') ~= nil end,
  millis = function(v)
    return #v <= MAX_DIGITS and (v == '0' or string.find(v, '^[1-9]%d*$') ~= nil)
  end,
  operation = function(v) return #v >= 1 and #v <= MAX_OP end,
  codec = function(v) return #v >= 1 and #v <= 32 and not string.find(v, '[^a-z0-9.%-]') end,
  flag = function(v) return v == '0' or v == '1' end,
  text = function(v) return #v <= MAX_REASON end,
}

-- valid reports whether v is a valid value of field f.
local function valid(f, v)
  return v ~= nil and v ~= false and CHECK[KIND[f]](v)
end

-- Redis server time in epoch milliseconds: the only clock leases use.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- int renders an integer the way fields store it.
local function int(n)
  return string.format('%d', n)
end

-- load reads the whole record and checks every field against the schema
-- and the cross-field rules, before the caller decides or writes anything.
-- It returns the record (field -> string) and its response (false unless
-- COMPLETED); nil when there is none; or nil, nil and the name of the
-- first field that breaks a rule.
local function load(key)
  local vals = redis.call('HMGET', key, 'resp', unpack(FIELDS))
  local resp = vals[1]
  local r, any = {}, resp ~= false
  for i = 1, #FIELDS do
    if vals[i + 1] then r[FIELDS[i]] = vals[i + 1]; any = true end
  end
  if not any then
    if redis.call('EXISTS', key) == 1 then return nil, nil, 'state' end
    return nil, nil, nil
  end
  for i = 1, #FIELDS do
    local f = FIELDS[i]
    local v = r[f]
    if v == nil then
      if REQUIRED[f] then return nil, nil, f end
    elseif not CHECK[KIND[f]](v) then
      return nil, nil, f
    end
  end
  if (r.state == 'CLAIMED' or r.state == 'EXECUTING') and not r.leaseUntil then
    return nil, nil, 'leaseUntil'
  end
  if r.state == 'EXECUTING' and not r.nonce then return nil, nil, 'nonce' end
  if r.state == 'COMPLETED' then
    if not r.sum then return nil, nil, 'sum' end
    if not resp then return nil, nil, 'resp' end
  elseif resp then
    return nil, nil, 'resp' -- only a COMPLETED record holds a response
  end
  return r, resp, nil
end

-- save writes the named fields of r: a string is set, false is deleted.
local function save(key, r, names)
  local set, del = {}, {}
  for i = 1, #names do
    local f = names[i]
    local v = r[f]
    if v then
      set[#set + 1] = f
      set[#set + 1] = v
    else
      del[#del + 1] = f
    end
  end
  if #set > 0 then redis.call('HSET', key, unpack(set)) end
  if #del > 0 then redis.call('HDEL', key, unpack(del)) end
end

local function pack(r)
  local out = {}
  for i = 1, #FIELDS do
    local v = r[FIELDS[i]]
    if v then out[i] = #v .. ':' .. v else out[i] = '-' end
  end
  return table.concat(out)
end

-- reply builds a reply from the record as the script left it. pttl may be
-- nil: it is read then.
local function reply(code, key, now, r, pttl, resp, extra)
  if pttl == nil then pttl = redis.call('PTTL', key) end
  local rec = false
  if r then rec = pack(r) end
  return {code, now, pttl, rec, resp or false, extra or false}
end

local function corrupt(key, now, field)
  return {R.CORRUPT, now, redis.call('PTTL', key), false, false, field}
end

local function not_found(now)
  return {R.NOT_FOUND, now, -2, false, false, false}
end

-- in_flight_ttl is the key TTL of a CLAIMED or EXECUTING record: the lease
-- left plus the failure retention, so the evidence of an attempt always
-- outlives its lease.
local function in_flight_ttl(lease_until, now, retention)
  local left = lease_until - now
  if left < 0 then left = 0 end
  return left + retention
end
