-- hvbench's wrk report: wrk's results as one JSON document on stdout.
--
-- wrk calls done() once, in its setup/done Lua state, after it has printed its own
-- human-readable report: ``summary`` (duration in microseconds, completed requests,
-- bytes read, errors by kind), ``latency`` (every completed request's latency in
-- microseconds) and ``requests`` (each thread's requests/s, sampled every 100 ms).
-- hvbench never reads wrk's human report; it reads the line this script writes, which
-- starts with MARK so it can be told apart from what wrk printed before it.
--
-- ``latency(i)`` is the i-th distinct latency recorded (ascending) and how many
-- requests had it, and ``#latency`` the number of distinct latencies: together the
-- whole histogram at wrk's 1 us resolution, which hvbench keeps for its CDF plots.
-- Requests slower than wrk's --timeout are not in it: wrk counts them as timeouts.
-- wrk finds the i-th latency by scanning its array from the smallest latency, so the
-- whole histogram costs about (#latency x (max - min)) steps: a wide tail with many
-- distinct values would take minutes. Above MAX_SCAN steps (about a second) the
-- histogram is left out (its sample count too: only the histogram gives it) and the
-- latency at a grid of QUANTILES is written instead, each one scan at most. (Not at
-- 100: wrk's percentile(100) is 0, its rank being one past the last sample; the
-- maximum is ``max``.)

local MARK = "hvbench-wrk-json "
local PERCENTILES = { 50, 90, 99, 99.9, 99.99 }
local MAX_SCAN = 2e9
local QUANTILES = {}
for p = 1, 99 do QUANTILES[#QUANTILES + 1] = p end
for _, step in ipairs({ 0.1, 0.01, 0.001 }) do
  for k = 1, 9 do QUANTILES[#QUANTILES + 1] = 100 - 10 * step + k * step end
end

-- A JSON number; JSON has no NaN or infinity (the mean of no samples), so null.
local function number(value)
  if value == nil or value ~= value or value == math.huge or value == -math.huge then
    return "null"
  end
  return string.format("%.17g", value)
end

-- A JSON string: backslash, quote and control characters escaped.
local function text(value)
  local escaped = string.gsub(tostring(value), '[%c"\\]', function(c)
    return string.format("\\u%04x", string.byte(c))
  end)
  return '"' .. escaped .. '"'
end

local function object(pairs_list)
  local parts = {}
  for _, pair in ipairs(pairs_list) do
    parts[#parts + 1] = text(pair[1]) .. ":" .. pair[2]
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

local function histogram(stats)
  local parts, count = {}, 0
  for i = 1, #stats do
    local value, hits = stats(i)
    parts[#parts + 1] = "[" .. number(value) .. "," .. number(hits) .. "]"
    count = count + hits
  end
  return "[" .. table.concat(parts, ",") .. "]", count
end

local function quantiles(stats)
  local parts = {}
  for _, p in ipairs(QUANTILES) do
    parts[#parts + 1] = "[" .. string.format("%.6g", p) .. "," ..
                        number(stats:percentile(p)) .. "]"
  end
  return "[" .. table.concat(parts, ",") .. "]"
end

local function percentiles(stats)
  local found = {}
  for _, p in ipairs(PERCENTILES) do
    found[#found + 1] = { string.format("%g", p), number(stats:percentile(p)) }
  end
  return object(found)
end

function done(summary, latency, requests)
  local distinct = #latency
  local shape
  if distinct * (latency.max - latency.min + 1) <= MAX_SCAN then
    local bins, count = histogram(latency)
    shape = { { "count", number(count) }, { "histogram", bins } }
  else
    shape = { { "count", "null" }, { "distinct", number(distinct) },
              { "quantiles", quantiles(latency) } }
  end
  local errors = summary.errors
  local doc = object({
    { "format", number(1) },
    { "url", text(wrk.scheme .. "://" .. wrk.host .. ":" .. tostring(wrk.port or "")
                  .. wrk.path) },
    { "duration_us", number(summary.duration) },
    { "requests", number(summary.requests) },
    { "bytes", number(summary.bytes) },
    { "errors", object({
        { "connect", number(errors.connect) }, { "read", number(errors.read) },
        { "write", number(errors.write) }, { "status", number(errors.status) },
        { "timeout", number(errors.timeout) } }) },
    { "latency_us", object({
        shape[1], { "min", number(latency.min) },
        { "max", number(latency.max) }, { "mean", number(latency.mean) },
        { "stdev", number(latency.stdev) }, { "percentiles", percentiles(latency) },
        unpack(shape, 2) }) },
    { "thread_rps", object({
        { "min", number(requests.min) }, { "max", number(requests.max) },
        { "mean", number(requests.mean) }, { "stdev", number(requests.stdev) } }) },
  })
  io.write("\n", MARK, doc, "\n")
  io.flush()
end
