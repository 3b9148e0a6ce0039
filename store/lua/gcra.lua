-- GCRA (the generic cell rate algorithm, a token bucket kept as one number):
-- may a request of cost ARGV[3] pass a limit of one request per ARGV[1]
-- microseconds with bursts of up to ARGV[2]? Refusals change nothing, so a
-- caller hammering a full limit does not push its own recovery further out.
-- KEYS[1]: the limiter's theoretical arrival time (TAT), Unix microseconds:
--          "<prefix>{<tenant id>}:api_rate" for a tenant's API rate (the hash
--          tag keeps a tenant's keys on one Redis Cluster slot);
--          "<prefix>{signup/<client>}:signup_rate" and
--          "<prefix>{signup}:signup_rate" for the sign-ups of one client
--          address and of every address (store/signuplimit.go)
-- ARGV[1]: emission interval in microseconds (1e6 / rate), > 0; may be fractional
-- ARGV[2]: burst: requests allowed at once, >= 1
-- ARGV[3]: cost of this request in requests, >= 1
-- Returns {allowed, remaining, reset_us, retry_after_us}:
--   allowed        1 when the request passes (and is counted), 0 when refused
--   remaining      requests that would pass right now after this decision
--   reset_us       microseconds until the full burst is available again
--   retry_after_us when refused, microseconds until this request would pass; else 0
-- The time is Redis's own (TIME), so API nodes with skewed clocks share one
-- limit fairly.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local tolerance = interval * burst

local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local new_tat = tat + interval * cost
local allow_at = new_tat - tolerance
if allow_at > now then
  local remaining = math.floor((now + tolerance - tat) / interval)
  if remaining < 0 then
    remaining = 0
  end
  return {0, remaining, math.ceil(tat - now), math.ceil(allow_at - now)}
end
-- Rounded up, so rounding never lets a request through early; the key lives
-- as long as it says anything (an idle limiter is a missing key).
new_tat = math.ceil(new_tat)
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX', math.ceil((new_tat - now) / 1000) + 1)
return {1, math.floor((now + tolerance - new_tat) / interval), new_tat - now, 0}
