#!lua flags=no-writes
-- inspect.lua: INSPECT, read only: the store sends it with EVALSHA_RO and
-- EVAL_RO (Redis 7.0+), so it runs on replicas, under CLIENT PAUSE WRITE
-- and when Redis is out of memory, cached or not.
--
-- KEYS[1]  record key
-- (no ARGV)
--
-- Replies:
--   CORRUPT    the stored record breaks the schema
--   NOT_FOUND  no record
--   FOUND      the record, with resp
local key = KEYS[1]
local now = now_ms()
local r, resp, bad = load(key)
if bad then return corrupt(key, now, bad) end
if not r then return not_found(now) end
return reply(R.FOUND, key, now, r, nil, resp)
