#!lua
-- release.lua: RELEASE a CLAIMED record before anything ran. Never after
-- EXECUTING: deleting that record would delete the evidence of an effect.
--
-- KEYS[1]  record key
-- ARGV[1]  owner (raw)             ARGV[2]  operation ID
-- ARGV[3]  expected rev
--
-- Replies:
--   CORRUPT      the stored record breaks the schema; nothing changed
--   NOT_FOUND    no record (or released already)
--   NOT_OWNER    another owner holds the record
--   OP_CONFLICT  same owner, another operation
--   WRONG_STATE  not CLAIMED
--   STALE_REV    the revision moved on
--   RELEASED     deleted
local key = KEYS[1]
local owner, op, rev = ARGV[1], ARGV[2], tonumber(ARGV[3])

local now = now_ms()
local r, resp, bad = load(key, owner, op)
if bad then return corrupt(key, now, bad) end
if not r then return not_found(now) end
if r.owner ~= owner then return reply(R.NOT_OWNER, key, now, r) end
if r.op ~= op then return reply(R.OP_CONFLICT, key, now, r) end
if r.state ~= 'CLAIMED' then return reply(R.WRONG_STATE, key, now, r) end
if tonumber(r.rev) ~= rev then return reply(R.STALE_REV, key, now, r) end
redis.call('DEL', key)
return R.RELEASED .. '\0' .. now .. '\0-2\0'
