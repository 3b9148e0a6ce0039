-- Fire-once claim of one attempt of one task: at most one sender may hold it
-- until it expires, whatever the Postgres layer believes.
-- KEYS[1]: the claim key, "<prefix>{<task id>}:attempt:<n>" (the hash tag keeps
--          every key of a task on one Redis Cluster slot)
-- ARGV[1]: the claimant's token (the Postgres claim token)
-- ARGV[2]: time to live in milliseconds (the attempt's lease)
-- Returns 1 when the caller holds the claim (newly taken, or already its own:
-- its time to live is then renewed), 0 when another token holds it.
local holder = redis.call('GET', KEYS[1])
if holder == false then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
