-- wrk script of the seed's stampede: every request a fresh customer and
-- orderId, over REST or GraphQL, as flashbench's load process sends it.
--
--   wrk -t2 -c256 -d10s --latency -s bench/wrk/sale.lua URL -- MODE CODE TOKEN
--
-- MODE is rest (URL the server's base), graphql (URL the server's base) or
-- ceiling (URL the flashbench ceiling process: the same REST body to a
-- trivial handler). CODE is the voucher's code, TOKEN a storefront token.

local threads = {}
local counter = 1

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

function init(args)
  mode, code, token = args[1] or "rest", args[2] or "WRK", args[3] or ""
  n = 0
  prefix = string.format("wrk-%d-%d-", os.time(), id)
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. token
  wrk.method = "POST"
  if mode == "graphql" then
    path = "/graphql"
  else
    path = "/vouchers/" .. code .. "/reservations"
  end
  successes, refusals = 0, 0
end

function request()
  n = n + 1
  local customer = id * 100000000 + n
  local order = prefix .. n
  local body
  if mode == "graphql" then
    body = string.format('{"query":"mutation($in: ReserveVoucherInput!) { reserveVoucher(input: $in) { reservation { orderId status } error { code } } }","variables":{"in":{"code":"%s","customerId":"%d","orderId":"%s","orderAmount":5000}}}', code, customer, order)
  else
    body = string.format('{"customerId":%d,"orderId":"%s","orderAmount":5000}', customer, order)
  end
  return wrk.format(nil, path, nil, body)
end

function response(status, headers, body)
  if status == 201 or (status == 200 and string.find(body, '"RESERVED"', 1, true)) then
    successes = successes + 1
  else
    refusals = refusals + 1
  end
end

function done(summary, latency, requests)
  local ok, no, mode = 0, 0, threads[1]:get("mode")
  for _, t in ipairs(threads) do
    ok = ok + t:get("successes")
    no = no + t:get("refusals")
  end
  local secs = summary.duration / 1e6
  io.write(string.format("wrk %s: %d requests in %.1f s = %.0f/s; p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, p99.9 %.2f ms, mean %.2f ms; successes %d, other answers %d; socket errors: connect %d, read %d, write %d, timeout %d\n",
    mode, summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000, latency.mean / 1000,
    ok, no, summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout))
end
