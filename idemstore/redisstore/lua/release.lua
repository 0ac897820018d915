#!lua
-- release.lua: RELEASE a CLAIMED record before anything ran. Never after
-- EXECUTING: deleting that record would delete the evidence of an effect.
--
-- KEYS[1]  record key
-- ARGV[1]  owner                   ARGV[2]  operation ID
-- ARGV[3]  expected rev
--
-- Replies:
--   NOT_FOUND    no record (or released already)
--   CORRUPT      the stored record does not decode
--   NOT_OWNER    another owner holds the record
--   OP_CONFLICT  same owner, another operation
--   WRONG_STATE  not CLAIMED
--   STALE_REV    the revision moved on
--   RELEASED     deleted
local key = KEYS[1]
local owner, op, rev = ARGV[1], ARGV[2], tonumber(ARGV[3])

local now = now_ms()
local r, bad = load(key)
if bad then return corrupt(key, now, bad) end
if not r then return reply('NOT_FOUND', key, now) end
if r.owner ~= owner then return reply('NOT_OWNER', key, now) end
if r.op ~= op then return reply('OP_CONFLICT', key, now) end
if r.state ~= 'CLAIMED' then return reply('WRONG_STATE', key, now) end
if r.rev ~= rev then return reply('STALE_REV', key, now) end
redis.call('DEL', key)
return reply('RELEASED', key, now)
