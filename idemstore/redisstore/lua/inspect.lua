#!lua
-- inspect.lua: INSPECT, read only.
--
-- KEYS[1]  record key
-- (no ARGV)
--
-- Replies:
--   MISSING  no record
--   CORRUPT  the stored record does not decode
--   FOUND    the record, with resp
local key = KEYS[1]
local now = now_ms()
local r, bad = load(key)
if bad then return corrupt(key, now, bad) end
if not r then return reply('MISSING', key, now) end
return reply('FOUND', key, now, true)
