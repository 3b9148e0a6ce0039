-- Releases a fire-once claim, but only the caller's own: a claim that expired
-- and was taken by another sender must not be deleted by the first one.
-- KEYS[1]: the claim key, "<prefix>{<task id>}:attempt:<n>"
-- ARGV[1]: the claimant's token
-- Returns 1 when the claim was released, 0 when the caller did not hold it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
