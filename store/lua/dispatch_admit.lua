-- Admission of one webhook send to a (tenant, target host) that has a
-- dispatch rate and/or a concurrency limit: send now, come back at a reserved
-- slot, or wait for a send in flight to finish. All or nothing: a refusal for
-- one limit takes nothing from the other.
--
-- The rate is a GCRA schedule that always books: each caller gets the next
-- free slot (KEYS[1] moves one interval on), and a caller whose slot is in
-- the future keeps it in KEYS[2] and is told to come back then. Successive
-- callers therefore get successive slots, so tasks that reach this script in
-- due order are sent in due order, one interval apart, however many fell due
-- at once. A task that comes back for its slot uses it without booking again;
-- one that comes back more than ARGV[5] late has lost it (its successors have
-- been sent meanwhile) and books a new one, so that a late send can never
-- crowd the ones after it above the rate.
--
-- The concurrency limit is a semaphore: a sorted set of holders scored by the
-- end of their lease, so the slots of a node that died mid-send come back
-- when its leases run out.
--
-- The same script serves a tenant's flow keys, whose keys are tagged
-- "{<tenant id>#<flow key>}" instead of "{<tenant id>/<host>}", KEYS[1] and
-- KEYS[2] with the spacing after the tag ("{...}:<spacing>:dispatch_rate").
-- KEYS[1]: the rate schedule: the next free slot, Unix microseconds,
--          "<prefix>{<tenant id>/<host>}:dispatch_rate"
-- KEYS[2]: this attempt's reserved slot, Unix microseconds,
--          "<prefix>{<tenant id>/<host>}:dispatch_slot:<task id>:<attempt>"
-- KEYS[3]: the sends in flight, holder -> lease end (Unix microseconds),
--          "<prefix>{<tenant id>/<host>}:inflight"
--          (the hash tag keeps the three on one Redis Cluster slot)
-- ARGV[1]: emission interval in microseconds (1e6 / rate), may be fractional; 0: no rate limit
-- ARGV[2]: concurrency limit; 0: none
-- ARGV[3]: the holder, "<task id>:<claim token>"
-- ARGV[4]: the holder's lease in microseconds
-- ARGV[5]: grace in microseconds: how late a task may come back for its
--          reserved slot and still use it
-- ARGV[6]: the instant the caller means to send, Unix microseconds by the
--          caller's clock (a claim is taken a little ahead of its due time);
--          the rate is decided for that instant, on the dispatchers' clocks,
--          so that a slot handed out is exactly the time the task comes back
--          at. The concurrency slot, if any, is taken now, by Redis's clock.
-- Returns {code, wait_us}:
--   {1, 0}     send at the instant meant; when concurrency is limited,
--              ARGV[3] now holds a slot
--   {0, wait}  send no sooner than wait_us after the instant meant; that
--              slot is reserved for this task (KEYS[2]) and nothing else
--              was taken
--   {-1, 0}    every concurrency slot is taken; nothing was changed
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local lease = tonumber(ARGV[4])
local grace = tonumber(ARGV[5])
local at = tonumber(ARGV[6])
-- Timers and Postgres's microseconds round: a caller a hair early is on time.
local early = 1000

if limit > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if not redis.call('ZSCORE', KEYS[3], ARGV[3]) and redis.call('ZCARD', KEYS[3]) >= limit then
    return {-1, 0}
  end
end

if interval > 0 then
  local on_time = false
  local reserved = redis.call('GET', KEYS[2])
  if reserved then
    reserved = tonumber(reserved)
    if reserved - at > early then
      return {0, math.ceil(reserved - at)}
    end
    redis.call('DEL', KEYS[2])
    on_time = at - reserved < grace
  end
  if not on_time then
    local slot = tonumber(redis.call('GET', KEYS[1]) or at)
    if slot < at then
      slot = at
    end
    slot = math.ceil(slot)
    local next_slot = math.ceil(slot + interval)
    redis.call('SET', KEYS[1], string.format('%.0f', next_slot), 'PX', math.ceil((next_slot - at) / 1000) + 1000)
    if slot - at > early then
      redis.call('SET', KEYS[2], string.format('%.0f', slot), 'PX', math.ceil((slot - at + grace) / 1000) + 60000)
      return {0, math.ceil(slot - at)}
    end
  end
end

if limit > 0 then
  redis.call('ZADD', KEYS[3], now + lease, ARGV[3])
  -- The set lives as long as its longest lease; never shorten it for a
  -- holder with a shorter one.
  local ttl = math.ceil(lease / 1000) + 1000
  if redis.call('PTTL', KEYS[3]) < ttl then
    redis.call('PEXPIRE', KEYS[3], ttl)
  end
end
return {1, 0}
