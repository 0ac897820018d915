#!lua
-- record.lua: helpers shared by every onceflow script. The store prepends
-- this file to each script body; it is not a script of its own.
--
-- Reply layout of every script (decoded in Go by decode.go):
--   { status, nowMs, pttlMs, field1, value1, field2, value2, ... }
-- where the pairs are the record's fields after the script ran (absent
-- fields are left out, "resp" only where the header says so) and fields
-- starting with "_" are script annotations (_from, _corrupt).

local FIELDS = {'state', 'owner', 'attempt', 'rev', 'op', 'fp', 'codec', 'policy',
  'leaseUntil', 'nonce', 'reason', 'uncertain', 'createdAt', 'updatedAt'}
local STATES = {CLAIMED = true, EXECUTING = true, COMPLETED = true,
  FAILED_RETRYABLE = true, ABANDONED = true}

-- Redis server time in epoch milliseconds: the only clock leases use.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- load returns (record, nil), (nil, nil) when missing, or (record, field)
-- when the field named is missing or malformed. Numbers are converted.
local function load(key)
  local vals = redis.call('HMGET', key, unpack(FIELDS))
  local r, any = {}, false
  for i, f in ipairs(FIELDS) do
    if vals[i] then r[f] = vals[i]; any = true end
  end
  if not any then return nil, nil end
  if not STATES[r.state or ''] then return r, 'state' end
  if not (r.owner and #r.owner == 64 and string.match(r.owner, '^[0-9a-f]+$')) then return r, 'owner' end
  for _, f in ipairs({'attempt', 'rev', 'policy', 'leaseUntil'}) do
    if not (r[f] and string.match(r[f], '^[0-9]+$')) then return r, f end
    r[f] = tonumber(r[f])
  end
  if r.attempt < 1 then return r, 'attempt' end
  if r.rev < 1 then return r, 'rev' end
  if not r.op or r.op == '' then return r, 'op' end
  if not r.fp or r.fp == '' then return r, 'fp' end
  return r, nil
end

-- reply builds the reply from the record as it is now.
local function reply(status, key, now, with_resp, extra)
  local out = {status, tostring(now), tostring(redis.call('PTTL', key))}
  local vals = redis.call('HMGET', key, unpack(FIELDS))
  for i, f in ipairs(FIELDS) do
    if vals[i] then out[#out + 1] = f; out[#out + 1] = vals[i] end
  end
  if with_resp then
    local resp = redis.call('HGET', key, 'resp')
    if resp then out[#out + 1] = 'resp'; out[#out + 1] = resp end
  end
  if extra then
    for k, v in pairs(extra) do out[#out + 1] = k; out[#out + 1] = v end
  end
  return out
end

local function corrupt(key, now, field)
  return reply('CORRUPT', key, now, false, {_corrupt = field})
end
