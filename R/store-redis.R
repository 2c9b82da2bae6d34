#' @include checks.R conditions.R store.R store-redis-tls.R
NULL

#' Breakers shared by a fleet of hosts through Redis
#'
#' @description
#' `breaker_store_redis()` describes a store for breakers that every process
#' of a fleet shares (containers behind a load balancer, Posit Connect on
#' several nodes): give it as `store` to [circuit_breaker()] with a `name`,
#' to [breaker_for()], or in `options(circuitbreaker.defaults = )`. Processes
#' that give the same name, the same server, prefix and rule arguments share
#' one breaker: one trip, one open period, and exactly `half_open_max_calls`
#' probes across the fleet.
#'
#' `breaker_store_redis_ping()` checks that the server answers within
#' `timeout`.
#'
#' For a managed Redis (ElastiCache, Azure Cache for Redis, Upstash, Aiven,
#' Redis Cloud, Memorystore), give the connection string as its console shows
#' it, from the environment (`Sys.getenv("REDIS_URL")`): see "TLS" and
#' "Security" below, and `vignette("shared-stores", package =
#' "circuitbreaker")` for each service's shape, the user it needs and what
#' each failure means.
#'
#' @section No round trip on the hot path:
#' In CLOSED and OPEN a call never talks to Redis. Each process keeps a local
#' copy of every shared breaker and admits and records on it, as a breaker of
#' this process would. A background C++ thread (one per store and process; it
#' never calls R) sends what happened once every `sync_interval` seconds: one
#' `EVALSHA` for the process's breakers of the store that have something to
#' report (calls, a probe's outcome, a manual command) or to learn (on a
#' Redis Cluster, one per breaker, in one pipeline per master: see
#' "Topologies and failover"). The
#' script keeps the fleet's counts and window, decides on the fleet's totals,
#' and answers with the fleet's state, which the local copy takes on. A
#' transition is also published (pub/sub): every process subscribes, and
#' reads the breaker named at once.
#'
#' So an idle breaker costs Redis nothing: a sync with nothing to send is a
#' `PING` (which keeps `mode` and `sync_lag` true), and once a second a sync
#' also reads one breaker in turn, whatever the number of breakers, so that
#' each one's fleet state is read (and its keys kept from expiring) every
#' so many seconds as the store has breakers. A process reads all of its
#' breakers when it (re)subscribes, since pub/sub drops what is published
#' while a connection is down (in syncs of at most 128 breakers). A sync
#' that fails (Redis or the machine slow: a timeout) keeps the subscription,
#' which loses nothing while it is connected; it is replaced only when its
#' own connection ends (a restarted Redis) or when it does not answer a
#' `PING` within `timeout` once the link is back. So a slow moment does not
#' make every process read all its breakers at once.
#'
#' Only a half-open probe pays a round trip: before it goes out it takes a
#' fleet-wide lease (`SET ... NX PX` with a token of its own, in a script),
#' so that exactly `half_open_max_calls` probes go out across the fleet. A
#' call that gets no lease is rejected as `half_open_full`. The lease lasts
#' `half_open_max_wait` if set, else `recovery_timeout` (at least a second),
#' so that a process killed while probing frees it by expiring. The lease
#' goes out on a live connection: when the server closed the process's
#' connection while it was idle (Redis restarted, `CLIENT KILL`, Redis's own
#' idle `timeout`, a proxy's), the first attempt fails at once, and the
#' connection is made again and the lease asked once more, all within
#' `timeout`. A probe goes out without a lease only when Redis really cannot
#' be reached, and then the mode says `"local"`.
#'
#' @section What counts the whole fleet:
#' `failure_threshold` and `minimum_calls` count the fleet's calls: five
#' consecutive failures may be two in one process and three in another, and
#' a success in any process ends the run (within a sync interval, the order
#' of the calls of different processes is approximate). Rates
#' (`failure_rate_threshold`, `slow_call_rate_threshold`) are rates, so they
#' are unaffected. A process also applies its own rules to its own calls
#' between two syncs; when they open its copy, the fleet opens too (if it has
#' not moved on meanwhile). So a dead downstream costs at most about
#' `failure_threshold` calls plus the calls made in one `sync_interval`,
#' whatever the number of processes.
#'
#' The shared times come from Redis `TIME` and replies carry durations
#' ("opened 2.1 s ago, for 30 s"), so the hosts' clocks need not agree.
#'
#' Manual control is fleet-wide: `$force_open()`, `$disable()` and `$reset()`
#' in one process apply to every process at its next sync. Listeners in every
#' process hear the fleet's transitions: on the next call, or through `later`
#' while an event loop runs (`circuitbreaker.host_poll_interval`, 0.5 s).
#'
#' A breaker's name has at most 80 bytes (in UTF-8), the limit of every
#' shared store ([breaker_store_host()] too), so that one name works in both.
#'
#' The bulkhead (`max_concurrent`) is counted per host: the processes of a
#' host that use the same fleet breaker (the same Redis server and
#' database, prefix and name) take its permits from one file that they all
#' map, as the processes of a [breaker_store_host()] breaker do, with no round
#' trip to Redis per call. So at most `max_concurrent` calls through the
#' breaker are in flight on each host (a fleet of H hosts makes at most H
#' times as many), a permit whose holder dies (even by `SIGKILL`) is freed by
#' the next call that finds the bulkhead full, and `share(p)` is a share of
#' the host's processes that have made a call through the breaker.
#' `$metrics()` (`in_flight`, `max_concurrent`, `rejected_full`), `print()`,
#' the status routes and the Prometheus metrics show the host's counts. The
#' file is `/dev/shm/circuitbreaker-<uid>/cbf-<hash>-<name>`, in the host
#' store's default directory for this user (made and checked as that store
#' makes and checks it: see "Security" in [breaker_store_host()]), where
#' `<hash>` names the server (its address, a cluster's seed nodes, or the
#' sentinels and the master's name), the database, the prefix and the
#' breaker, never a password. Processes must therefore give the same `url`
#' (the same host name and port; the password may differ), or the same
#' sentinels, to share a host's permits. The file stays when the processes
#' end, as a host store's does; [breaker_store_unlink()] removes it (on the
#' host where it runs) with the breaker's keys. A file in the way that is not
#' this user's makes creating the breaker fail with the host store's errors
#' (such as `circuit_breaker_store_untrusted`), which name the file. Where
#' processes cannot share memory (macOS, Windows: no robust process-shared
#' mutexes), each process's local copy holds its own permits: the bulkhead
#' is counted per process, and `share(p)` is one permit. `max_concurrent`
#' and `max_wait` are rule arguments (the identity below), so every process
#' has the same limit.
#'
#' The rule arguments are the breaker's identity: a process that gives other
#' values gets an error of class `circuit_breaker_store_wrong_config` naming
#' the first one that differs, and `$configure()` refuses them (as for
#' [breaker_store_host()]). The fallback, listeners, `failure_when`, `ignore`,
#' `timeout` and `failure_statuses` stay each process's own.
#'
#' @section When Redis is down, hung or cut off:
#' Every command is bounded by `timeout`. The link to Redis has a breaker of
#' its own: after a failed round trip nothing waits on Redis until it lets a
#' retry through (after 0.25 s, doubling to at most 5 s). Meanwhile each
#' process runs every breaker on its local rules (mode `"local"`), and no call
#' waits longer than `timeout` (only a half-open probe ever waits, for its
#' lease). The counts made meanwhile are sent on reconnect; the later
#' open-until and the higher generation win, and the process takes on the
#' fleet's state. A probe sent on local rules is reported too: its success
#' (or failure) counts as a probe of the fleet's half-open period that
#' follows the open period it was sent at the end of, so it closes (or
#' re-opens) the fleet breaker, unless the fleet has moved on meanwhile. A
#' health check (`health_check` of [circuit_breaker()]) runs on local rules
#' too: each process runs it once per interval, not one process of the fleet
#' (its lease is not taken; see "Keys"). A
#' report retried after a timeout is applied once (reports carry ids). A
#' Redis restarted empty is rebuilt from the processes' reports: the
#' breaker stays open until the same time, in the same generation (the
#' processes reconnect, and read every breaker; keys lost without a restart,
#' to `FLUSHALL` or eviction, are rebuilt by the next report, or in turn).
#'
#' A store that cannot reach Redis says so: when its first breaker is
#' created (a typo in the URL, a firewall, a wrong password), or once its
#' link has been down for 5 sync intervals (and at least a second), it
#' raises a warning of class `circuit_breaker_store_alone` (a
#' `circuit_breaker_warning`), once, with the masked URL and the reason (its
#' fields `url`, `prefix` and `reason`); when the link is back, a message of
#' class `circuit_breaker_store_rejoined`. They are raised where a call
#' already goes through R, so that no call pays for them: at a breaker's
#' creation, by `$metrics()` (so [breaker_list()], the status routes and the
#' Prometheus metrics) and, for a breaker with listeners while an event loop
#' runs, at each poll (`circuitbreaker.host_poll_interval`).
#'
#' `$metrics()` shows `mode` (`"fleet"` or `"local"`), `sync_lag` (seconds
#' since the last good sync), `last_sync` (its time), the fleet's counts and
#' `last_error`, the last failure of the link (a refused connection, a
#' timeout, or the server's answer, such as `WRONGPASS invalid
#' username-password pair` for a wrong password); so do [breaker_list()],
#' `print()` of the store (and of the breaker, while its mode is `"local"`)
#' and the status routes ([pr_circuit_breakers()],
#' [api_circuit_breakers()])
#' and the Prometheus metrics ([breaker_prometheus()]:
#' `circuitbreaker_fleet_mode`, `circuitbreaker_fleet_sync_lag_seconds`,
#' `circuitbreaker_fleet_last_sync_timestamp_seconds`).
#'
#' @section Topologies and failover:
#' On a single server (the default), `url` says where it is.
#'
#' For a master with replicas behind Redis Sentinel, give the sentinels'
#' addresses as `sentinel` (`"host:port"`, an IPv6 host in brackets) and the
#' name under which they monitor the master as `master`. The store asks the
#' sentinels, one after the other (the one that answered last first, then in
#' the order given), `SENTINEL get-master-addr-by-name`, connects to the
#' address named, and checks that the node says it is a master (`ROLE`).
#' Every new connection asks again: a connection is made anew after any
#' failed round trip, and a `-READONLY` reply (the node was demoted to a
#' replica) closes it. Finding the master, connecting and the checks take at
#' most `timeout` in all, however many sentinels are down. `url` is then
#' optional and gives only the master's password (and user name) and the
#' database, for example `"redis://:password@mymaster/0"`: its host and port
#' are not used. `sentinel_password` is the sentinels' own password (their
#' `requirepass`), if they have one; like the URL's, it never appears in a
#' message, `print()`, `$metrics()` or a log.
#'
#' `$metrics()`, [breaker_list()] and the status routes show `topology`
#' (`"single"`, `"sentinel"` or `"cluster"`), `master`, the address of the
#' master the store last connected to (`NA` before it found one), and
#' `masters`, their number (1 but on a cluster); `print()` of the store
#' shows them as `topology: sentinel (master 10.0.0.5:6379)`.
#'
#' *During a failover* (the master dies; the sentinels agree, after their
#' `down-after-milliseconds`, and promote a replica) the store cannot reach
#' a master: every round trip fails within `timeout`, the link's breaker
#' paces the retries, and each process runs its breakers on their local
#' rules (mode `"local"`; no call waits longer than `timeout`). Once the
#' sentinels name the promoted replica, the next retry connects there and
#' the breakers rejoin by the usual merge (see above): the counts made
#' meanwhile are sent, the later open-until and the higher generation win.
#'
#' *What a failover can lose.* Redis replicates asynchronously: the master
#' acknowledges a write before its replicas have it. What the old master
#' accepted in its last moments (typically the last sync interval or so)
#' may be missing on the promoted replica: the last counts of some
#' processes, a trip, a manual `$force_open()` or a probe's lease. The
#' fleet then does what it does after a Redis restarted empty, for these
#' breakers only: the processes' next reports rebuild them, a process
#' whose copy is open (it tripped, or heard of the trip) reports the open
#' period again, and a lease that was lost lets one more probe out. A count
#' lost is not counted again, so a run of failures may need a few more
#' calls to trip. The Redis settings `min-replicas-to-write` and
#' `min-replicas-max-lag` narrow the window (at the cost of refusing writes
#' when the replicas lag; the store then runs on local rules).
#'
#' *On a Redis Cluster*, give any node as `url`, or several (the seed
#' nodes), as a character vector of URLs: `c("redis://10.0.0.1:6379/0",
#' "redis://10.0.0.2:6379/0")`. They share one user name and password, and
#' the database is 0 (a cluster has no other; another is refused with an
#' error naming `url`). On its first connection the store asks the first
#' seed that answers for its slot map (`CLUSTER SLOTS`): a map means a
#' cluster; an error, a single server (which several URLs cannot be).
#' Nothing else changes for a single server.
#'
#' On a cluster, no script touches keys of two slots: a sync sends one
#' `EVALSHA` per breaker (every key of a breaker is in one slot, see
#' "Keys"), in one pipeline per master; every master's pipeline is written
#' before any reply is read, so a sync costs about one round trip, however
#' many masters and breakers, and the whole sync is bounded by `timeout`.
#' A master that carries no breaker in a sync gets a `PING` instead, so an
#' idle store costs each master a `PING` per sync. The store keeps the slot
#' map: a `MOVED` reply corrects it at once (and the map is read again at
#' the next sync), and the breaker's report goes again to the node named,
#' within the same sync if time is left (reports carry ids: it is counted
#' once); an `ASK` reply (a slot being migrated) is followed with `ASKING`;
#' a node that lost the scripts (`NOSCRIPT`) gets them again. A half-open
#' probe's lease and a health check's lease go to the master of their
#' breaker's slot and follow redirects, within `timeout`. The store subscribes to its events channel
#' on one node (pub/sub reaches every node of a cluster); when that node is
#' lost, it subscribes on another and reads every breaker once.
#'
#' `topology` is then `"cluster"`, `masters` the number of masters and
#' `master` the address of the master that serves the breaker;
#' `print()` of the store shows `topology: cluster (3 masters)`. `mode` and
#' `sync_lag` are each breaker's: a breaker whose master cannot be reached
#' says `"local"` while the others sync.
#'
#' *During a resharding* (a slot moved to another master) the first reports
#' sent to the old master come back `MOVED` (or `ASK`, or `TRYAGAIN` while
#' the slot's keys are split between the two nodes); they go again, to the
#' new master, in the same or the next sync. Nothing is lost: the keys move
#' with their slot.
#'
#' *When a master dies*, the breakers it served run on local rules (their
#' mode says `"local"`; their reports wait) while the others sync; no call
#' waits longer than `timeout`, and the dead node is asked again only every
#' quarter of a second. Once the cluster has marked the master as failed
#' (after `cluster-node-timeout`), a cluster with
#' `cluster-require-full-coverage yes` (the default) refuses every write
#' (`CLUSTERDOWN`) until a replica is promoted: then every breaker runs on
#' local rules for that moment, and the store may say it is alone. The cluster promotes a replica after its
#' `cluster-node-timeout` (and a second or so of election); at the next
#' sync after that the store reads the new map from any node it knows (the
#' seeds and the nodes of the map) and sends the waiting reports there. So
#' the fleet resumes within about `cluster-node-timeout` plus two seconds
#' plus one `sync_interval` after the master died (in the tests, with a
#' `cluster-node-timeout` of one second: well within 60 seconds, the bound
#' they assert). What the dead master had not yet replicated is lost, as
#' with Sentinel (below): the last counts, a trip or a lease of its last
#' moments; the fleet rebuilds these breakers from the processes' reports.
#'
#'
#' @section Keys:
#' Every key of breaker `name` in a store with prefix `prefix` is
#' `cb2:{<prefix>:<name>}` and a suffix, where `<prefix>` and `<name>` are
#' percent-encoded: every byte but the letters `A-Z a-z`, the digits, `_`,
#' `.` and `-` is written `%XX` (upper-case hex), so `:` is `%3A` and
#' `{`, `}` and `%` are `%7B`, `%7D` and `%25`. So no two (prefix, name)
#' pairs share a key: prefix `"a"` with name `"b:c"` is `cb2:{a:b%3Ac}`,
#' prefix `"a:b"` with name `"c"` is `cb2:{a%3Ab:c}`.
#'
#' * `cb2:{<prefix>:<name>}`: a hash. Field `v` holds the fleet's state of
#'   the breaker packed in one string (generation, state, open-since and
#'   open duration by Redis `TIME`, counts, the fleet's totals); `cfg` the
#'   rule arguments that are its identity; `w` the fleet's sliding window,
#'   packed, one entry per report (each process's outcomes of one sync
#'   interval; a report joins the newest entry while that holds under 1/32
#'   of the window, so a window keeps about 32 entries), kept only when a
#'   rate rule reads it: a count window of `window_size` calls is exact in
#'   its size and approximate in its order, the oldest entry in it cut down
#'   to what is left, with its shares of failed and slow calls; and
#'   `p:<id>`, per breaker object of each process, the serial of its last
#'   report applied (a retried report is counted once). Packed, because a
#'   busy sync's cost to Redis is mostly that of moving values in and out
#'   of its script: a busy report costs Redis one `HMGET` and one `HSET`. A
#'   breaker's `$metrics()` shows the fleet's state as this process last
#'   had it;
#' * `...:p:<slot>`: a half-open probe's lease, holding its token, for at
#'   most the lease's time;
#' * `...:h`: the health check's lease (when the breaker has a
#'   `health_check`), holding the token of the process that runs this
#'   interval's check: set with `SET ... NX PX` for `health_interval`, so one
#'   process of the fleet runs each check and a holder that dies holds it for
#'   one interval at most.
#'
#' Transitions are published on the channel `cb2:{<prefix>}:events`. Every
#' key expires after a day without a report.
#'
#' `cb2` is the key format's version. It comes before the braces, which are a
#' Redis Cluster hash tag holding the whole identity and nothing else, so
#' that a breaker's keys share one slot; another format gets another
#' version, and `SCAN 0 MATCH cb2:*` finds every key of this one. Earlier
#' development versions used format `cb1` (a field per value, the window in
#' a list): processes of those versions and of this one do not share
#' breakers, so upgrade a fleet's processes together (the `cb1` keys expire
#' on their own). On a Redis Cluster each script call covers one breaker, so that it touches one slot
#' (see "Topologies and failover").
#' (With `redis-cli`, add `-c` on a cluster to follow the redirects.)
#'
#' To remove a breaker's keys (once no process uses it, for instance to
#' change its rule arguments), call [breaker_store_unlink()] with the store:
#' `breaker_store_unlink("payments", fleet)` deletes the hash and every
#' suffix of breaker `"payments"` (one `DEL`, on a connection of its own,
#' bounded by `timeout`), and no other breaker's keys, and, first, this
#' host's file of the breaker's bulkhead permits, if it has one (see "What
#' counts the whole fleet"; call it on each host to remove theirs); it
#' returns `TRUE` (invisibly) when there was something to delete, and raises
#' an error of class `circuit_breaker_store_unreachable` when Redis cannot
#' be reached.
#' The next breaker created with that name starts afresh. A process that
#' still uses the breaker writes it again at its next sync, from its own
#' state. From a shell:
#' `redis-cli --scan --pattern 'cb2:{myapp:payments}*' | xargs redis-cli del`
#' (quote the pattern; the glob characters `*`, `?` and `[` of a name are
#' encoded, so the pattern matches this breaker's keys only).
#'
#' @section TLS:
#' TLS is on when the URL is `rediss://` or `tls` is not `NULL`
#' (`tls = list()` is TLS with the defaults). It is TLS 1.2 at least, and it
#' verifies by default: the server's certificate chain against OpenSSL's
#' default paths (the system's CAs, or the file that `SSL_CERT_FILE` names)
#' or against `ca_file` / `ca_dir` when given, and its name against
#' `server_name`, else the URL's host (a host that is an IP address must be
#' one of the certificate's IP addresses; a name is also sent as SNI). The
#' same settings apply to every connection of the store: each seed and node
#' of a Cluster, the sentinels and the master they name. A node the store
#' learns of (from `CLUSTER SLOTS`, or the master's address from the
#' sentinels) is verified by its announced host name when it has one, else
#' by `server_name`, else by its IP address; a node you give (the URL's host,
#' a seed, a sentinel) by `server_name`, else by its host.
#'
#' `tls = list(verify = FALSE)` (or the URL's `ssl_cert_reqs=none`) encrypts
#' without checking who answers, and warns once per session with class
#' `circuit_breaker_tls_unverified`: give `ca_file` instead.
#'
#' A console's URL works as it is: `rediss://user:password@host:port/db`, and
#' the query parameters `ssl_cert_reqs` (`none`, `optional`, `required`),
#' `ssl_ca_certs`, `ssl_ca_path`, `ssl_certfile`, `ssl_keyfile` and `sni`
#' (or `ssl_server_hostname`) set the `tls` fields of the same meaning (a
#' field of `tls` wins over the URL's); `ssl=true` turns TLS on for a
#' `redis://` URL. Other parameters are ignored with a warning of class
#' `circuit_breaker_store_url_ignored`, once, naming them (never their
#' values). The name verified is separate from the address dialled: to
#' connect through a tunnel or an IP address while checking the service's
#' name, give `server_name`.
#'
#' A handshake that fails makes the store run on local rules, with the
#' reason as `last_error` and in the `circuit_breaker_store_alone` warning:
#' `"TLS: unknown CA ..."` (give `ca_file`), `"TLS: name mismatch ..."`
#' (give `server_name`), `"TLS: the server's certificate has expired"`,
#' `"TLS: not a TLS server ..."` (a plain port: use `redis://`), `"TLS: the
#' server asks for a client certificate ..."` (give `cert_file` and
#' `key_file`), `"TLS: handshake failed: ..."` (OpenSSL's reason) and, the
#' other way, `"... before any answer (a TLS port? use rediss://)"`.
#' `vignette("shared-stores")` lists them all, with what to do.
#'
#' `print()` of the store, `$metrics()$tls`, the status routes (`tls`) and
#' the Prometheus gauge `circuitbreaker_fleet_tls{version}` say which TLS
#' version the links use (`"TLSv1.3"`, `"TLSv1.2"`; `"on"` before the first
#' handshake), or `"off"`.
#'
#' @section Requirements:
#' The client library is hiredis, found when the package is installed
#' (Debian and Ubuntu: `apt-get install libhiredis-dev`; Fedora:
#' `dnf install hiredis-devel`; macOS: `brew install hiredis`; then install
#' the package again). Without it, `breaker_store_redis()` raises an error of
#' class `circuit_breaker_store_unavailable` that says so. TLS needs OpenSSL
#' as well (Debian and Ubuntu: `apt-get install libssl-dev`; Fedora:
#' `dnf install openssl-devel`; macOS: `brew install openssl@3`; then install
#' the package again); without it, a TLS store raises the same error, saying
#' so. A process that
#' forks (`parallel::mcparallel()`) does not take the sync thread with it:
#' use separate processes (callr, future's multisession, plumber workers).
#'
#' @section Security:
#' *Who can read and change a fleet breaker.* Anyone who can run commands
#' on the Redis database: a fleet breaker is a few keys there, and a client
#' that writes them can open, close or disable the breaker for every process
#' of the fleet, or read its counts. Give the fleet a Redis of its own, or at
#' least a database (`/db` in the URL) and a `prefix` of its own, and protect
#' it: a password (`requirepass`) or, better, an ACL user of its own whose
#' key and channel patterns cover only the store's prefix (see "Keys"), and
#' a Redis reachable from the fleet's private network only. Over a network
#' that others can listen on, use TLS (`rediss://`, see "TLS") with
#' verification on: without it the password and the fleet's state travel in
#' clear.
#'
#' *Least privilege.* The store needs these commands and no others, on the
#' keys `cb2:{<prefix>:*` and the channel `cb2:{<prefix>}:events` (the
#' prefix percent-encoded as in "Keys"; `:` is `%3A`). For prefix `"myapp"`,
#' this ACL user (Redis 6.2 or later; put a password of your own after `>`)
#' is all a fleet store needs, on a single server, a Cluster's nodes or a
#' Sentinel's master and replicas (Redis does not replicate ACLs: run it on
#' every node, or put the rules in its `aclfile`):
#'
#' `r redis_acl_block("myapp")`
#'
#' The store sends `AUTH`, `SELECT` (a database other than 0), `PING`,
#' `SCRIPT LOAD` and `EVALSHA` (or `EVAL`, with the script's source, where
#' `SCRIPT LOAD` is not allowed), `SUBSCRIBE`, `SET` (the
#' health check's lease), `DEL` ([breaker_store_unlink()]), `ROLE` (behind
#' Sentinel), `CLUSTER SLOTS` or `CLUSTER SHARDS` and `ASKING` (on a Cluster);
#' its scripts run `TIME`, `HMGET`, `HGET`, `HSET`, `GET`, `SET`, `DEL`,
#' `PEXPIRE`, `PTTL` and `PUBLISH`, which Redis checks against the same user.
#' It never needs `CONFIG`, `KEYS`, `FLUSHALL`, `FLUSHDB`, `DEBUG` or
#' `CLIENT KILL`. Sentinels with users of their own need only
#' `+sentinel|get-master-addr-by-name` (and `+auth`) for
#' `sentinel_password`'s user. A command that the user lacks makes the store
#' run on local rules with the server's `NOPERM` reply as `last_error`.
#'
#' *What a hostile Redis, or a client that writes the store's keys, can do
#' to a process.* Decide the fleet's state: open or close its breakers, take
#' every probe lease, make the process run on its local rules (mode
#' `"local"`). It cannot crash the process or make a call wait longer than
#' `timeout`: replies are parsed as input and checked (type, count,
#' numbers); a reply that does not fit is ignored or counts as a failed round
#' trip, after which the process applies its local rules and says so in
#' `mode` and `last_error`. It cannot run R code: the background thread never
#' calls R.
#'
#' *Secrets.* The password (and user name) of the URL never appears in an
#' error, warning, `print()` or `format()` of a store or a breaker,
#' `$metrics()`, [breaker_list()], the status routes or the Prometheus
#' metrics: they show `***` instead (`redis://***:***@host:6379/0`), also
#' for a URL that is refused, and the password is removed from the server's
#' and hiredis's messages. The store object keeps the URL out of sight of
#' `str()` and `dput()`, but it is in the process's memory and in whatever
#' code or configuration gave it: pass it from an environment variable or a
#' secret store, not in source code. The `tls` settings are paths, shown in
#' errors when a file is missing; a value that looks like a certificate or a
#' key (PEM text given where its path belongs) is described, never shown.
#'
#' @param url A `redis://[[user]:password@]host[:port][/db]` URL, or
#'   `rediss://` for TLS, maybe with a query (`?ssl_cert_reqs=required`, see
#'   "TLS"); `NULL` (the default) is `"redis://127.0.0.1:6379/0"`. With
#'   `sentinel`, only its user name, password, database and TLS settings are
#'   used (see "Topologies and failover").
#'   On a Redis Cluster, any node's URL, or the URLs of several (1 to 100
#'   seed nodes, with one user name and password, one TLS setting, and
#'   database 0); the store finds out by itself that it is a cluster.
#' @param prefix The prefix of every key, so that several applications can
#'   share one Redis: letters, digits, `_`, `-`, `.` and `:`.
#' @param sync_interval Seconds between two syncs with Redis, from 0.01 to 60.
#' @param timeout Seconds any one round trip to Redis may take (connecting
#'   included), from 0.001 to 60.
#' @param sentinel `NULL` (a single server, at `url`), or the addresses of
#'   the Redis Sentinels that monitor the master, such as
#'   `c("10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379")`.
#' @param master The name under which the sentinels monitor the master
#'   (`sentinel monitor <master> ...` in their configuration).
#' @param sentinel_password `NULL`, or the sentinels' own password (their
#'   `requirepass`; not the master's, which `url` gives).
#' @param tls `NULL` (TLS only when `url` is `rediss://`), or a named list of
#'   TLS settings, which turns TLS on and completes the URL's: `ca_file` (a
#'   PEM file of the CAs to trust instead of the system's), `ca_dir` (a
#'   directory of them, hashed by `openssl rehash`), `cert_file` and
#'   `key_file` (a client certificate and its key, both or neither, for
#'   servers that ask for one: mutual TLS), `server_name` (the name to verify
#'   and send as SNI; by default the URL's host) and `verify` (`TRUE`, the
#'   default; `FALSE` encrypts without checking the server, and warns). Files
#'   must be readable when the store is made; an unknown name, a wrong type
#'   or an unreadable file is an error of class
#'   `circuit_breaker_invalid_argument` naming the field (`tls$ca_file`).
#' @param store A store from `breaker_store_redis()`.
#' @return `breaker_store_redis()`: a store object. `breaker_store_redis_ping()`:
#'   `TRUE` when the server answered `PONG` within `timeout`, else `FALSE` with
#'   the reason as the attribute `"message"`.
#' @seealso [breaker_store_host()] for the processes of one host;
#'   `vignette("shared-stores", package = "circuitbreaker")` for production
#'   Redis (managed services, TLS, the ACL user, what each failure means).
#' @examples
#' \dontrun{
#' fleet <- breaker_store_redis("redis://127.0.0.1:6379/0", prefix = "myapp")
#' # A managed Redis over TLS, its console's URL in the environment
#' # (rediss://default:<password>@<host>:6379), verified with the system's CAs:
#' managed <- breaker_store_redis(Sys.getenv("REDIS_URL"), prefix = "myapp")
#' # A server whose certificate is signed by a CA of your own:
#' private <- breaker_store_redis("rediss://:password@10.0.0.5:6380/0", prefix = "myapp",
#'                                tls = list(ca_file = "/etc/redis/ca.pem",
#'                                           server_name = "redis.internal"))
#' # A Redis Cluster, given two of its nodes:
#' clustered <- breaker_store_redis(c("redis://10.0.0.1:6379/0", "redis://10.0.0.2:6379/0"),
#'                                  prefix = "myapp")
#' # A master behind Sentinel; the password from the environment:
#' ha <- breaker_store_redis(Sys.getenv("REDIS_URL"), prefix = "myapp",
#'                           sentinel = c("10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"),
#'                           master = "mymaster")
#' cb <- circuit_breaker(name = "payments", store = fleet, failure_threshold = 5)
#' cb$execute(function() httr::GET("http://127.0.0.1:8080/pay"),
#'            function() "the payment service is unavailable")
#' cb$metrics()[c("state", "mode", "sync_lag")]
#' }
#' @export
breaker_store_redis <- function(url = NULL, prefix = "circuitbreaker", sync_interval = 0.1, timeout = 0.1,
                                sentinel = NULL, master = "mymaster", sentinel_password = NULL, tls = NULL) {
  call <- rlang::current_call()
  if (is.null(url)) url <- "redis://127.0.0.1:6379/0"
  if (!is.character(url) || length(url) <= 1L) check_string(url, call = call)
  if (length(url) > 100L || anyNA(url)) {
    # Shown masked: a URL may hold a password.
    abort_bad_argument("url", "a redis:// URL, or the URLs of 1 to 100 seed nodes of one Redis Cluster",
                       vapply(url, cb_mask_url, character(1), USE.NAMES = FALSE), call = call)
  }
  endpoint <- cb_redis_parse_url(url)
  check_string(prefix, call = call)
  if (!grepl("^[A-Za-z0-9_.:-]+$", prefix) || nchar(prefix) > 100L) {
    abort_bad_argument("prefix", "at most 100 letters, digits, `_`, `-`, `.` and `:`", prefix, call = call)
  }
  check_number_decimal(sync_interval, "sync_interval", min = 0.01, max = 60,
                       must = "a number of seconds from 0.01 to 60", call = call)
  check_number_decimal(timeout, "timeout", min = 0.001, max = 60,
                       must = "a number of seconds from 0.001 to 60", call = call)
  topology <- redis_sentinel_args(sentinel, master, sentinel_password, call = call)
  tls <- redis_tls_settings(tls, endpoint, call = call)
  if (!cb_redis_available()) abort_redis_unavailable(call = call)
  if (!is.null(tls) && !cb_redis_tls_available()) abort_redis_tls_unavailable(call = call)
  # The URL with its password stays in an environment, so that printing,
  # str() or dput() of the store shows only the masked one.
  secret <- new.env(parent = emptyenv())
  secret$url <- url
  secret$sentinel_password <- sentinel_password
  shown <- paste(redis_shown_url(url, tls = !is.null(tls)), collapse = ", ")
  if (!is.null(topology$sentinel)) {
    shown <- paste0("sentinel master \"", topology$master, "\" via ",
                    paste(topology$sentinel, collapse = ", "), ", db ", endpoint$db, if (!is.null(tls)) ", TLS")
  }
  # The endpoint without what the URL said of TLS: the store keeps the
  # merged settings (`tls`), and its unknown query parameters are told once.
  parts <- endpoint[setdiff(names(endpoint), c("tls", "query_unknown"))]
  store <- structure(
    list(kind = "redis", url = shown, endpoint = parts, prefix = prefix,
         sync_interval = sync_interval, timeout = timeout, sentinel = topology$sentinel,
         master = topology$master, tls = tls, secret = secret),
    class = c("circuit_breaker_store_redis", "circuit_breaker_store")
  )
  redis_url_warnings(store, endpoint)
  store
}

# URLs as a store shows them: masked (no user name or password), without
# their query (the core read it; a value there might be a secret), and
# rediss:// when the store speaks TLS (also when a redis:// URL turned it on
# with `ssl=true` or `tls` did).
redis_shown_url <- function(url, tls) {
  shown <- sub("[?#].*$", "", vapply(url, cb_mask_url, character(1), USE.NAMES = FALSE))
  if (tls) shown <- sub("^redis://", "rediss://", shown)
  shown
}

# The Sentinel arguments, checked: list(sentinel = the addresses as the
# core reads them, or NULL for a single server; master).
redis_sentinel_args <- function(sentinel, master, sentinel_password, call) {
  # A bad master name is a mistake whether or not sentinels are given.
  if (!rlang::is_string(master) || !cb_redis_valid_master_name(master)) {
    abort_bad_argument("master",
                       "the name the sentinels monitor the master under: 1 to 200 letters, digits, `_`, `-` and `.`",
                       master, call = call)
  }
  if (is.null(sentinel)) {
    if (!is.null(sentinel_password)) {
      # Not abort_bad_argument(): its value, a password, is never shown.
      cli::cli_abort(
        c("{.arg sentinel_password} must be NULL when {.arg sentinel} is NULL.",
          i = "The password of a single server goes in {.arg url}: {.code redis://:password@host:6379/0}."),
        class = c("circuit_breaker_invalid_argument", "circuit_breaker_error"),
        argument = "sentinel_password", call = call
      )
    }
    return(list(sentinel = NULL, master = NULL))
  }
  if (!is.character(sentinel) || length(sentinel) == 0L || length(sentinel) > 100L) {
    abort_bad_argument("sentinel", "a character vector of 1 to 100 sentinel addresses such as \"127.0.0.1:26379\"",
                       sentinel, call = call)
  }
  sentinel <- rlang::try_fetch(
    cb_redis_parse_sentinels(sentinel),
    # The core's words, with this call; the value is masked (a sentinel
    # given as a URL may hold a password).
    circuit_breaker_invalid_argument = function(cnd) {
      abort_bad_argument("sentinel", "\"host:port\" addresses (an IPv6 host in brackets) with a port from 1 to 65535",
                         cnd$value, call = call)
    }
  )
  if (!is.null(sentinel_password) && (!rlang::is_string(sentinel_password) || !nzchar(sentinel_password))) {
    # describe_value() shows a string only when it is a single one, which
    # here is the empty string: never a password.
    abort_bad_argument("sentinel_password", "NULL or a non-empty string (the sentinels' password)",
                       sentinel_password, call = call)
  }
  list(sentinel = sentinel, master = master)
}

#' @rdname breaker_store_redis
#' @export
breaker_store_redis_ping <- function(store) {
  check_redis_store(store)
  res <- cb_redis_ping(redis_store_spec(store))
  structure(isTRUE(res$ok) && identical(res$message, "PONG"), message = res$message)
}

check_redis_store <- function(store, call = rlang::caller_env()) {
  if (!inherits(store, "circuit_breaker_store_redis")) {
    abort_bad_argument("store", "a store from `breaker_store_redis()`", store, call = call)
  }
  store
}

# The Redis store's methods (store.R says what each is asked).

# nolint start: object_name_linter, object_length_linter. (lintr lints file by file and sees
# only the generics of the file it lints; store.R holds these.)

# What cb_create() needs to join the fleet: the connection details and the
# name.
#' @exportS3Method
store_location.circuit_breaker_store_redis <- function(store, name, call) {
  check_shared_name(store, name, call)
  c(redis_store_spec(store), list(name = name))
}

#' @exportS3Method
store_clock.circuit_breaker_store_redis <- function(store) "Redis `TIME` (the fleet's clock)"

#' @exportS3Method
store_polls.circuit_breaker_store_redis <- function(store) TRUE

#' @exportS3Method
store_link_news.circuit_breaker_store_redis <- function(store) fleet_link_news(store)

#' @exportS3Method
store_label.circuit_breaker_store_redis <- function(store, m) paste0("fleet-shared, ", m$mode)

# While the store runs on local rules, print() says why; behind Sentinel,
# it names the master.
#' @exportS3Method
store_format_lines.circuit_breaker_store_redis <- function(store, m) {
  c(
    if (m$topology %in% c("sentinel", "cluster")) {
      paste0("  Redis topology: ", redis_topology_text(m$topology, m$master, m$masters))
    },
    if (identical(m$mode, "local") && !is.na(m$last_error)) paste0("  last error of the link to Redis: ", m$last_error)
  )
}

# The tooltip names the masked URL (never the password) and the mode.
#' @exportS3Method
store_badge.circuit_breaker_store_redis <- function(store, m) {
  mode <- if (identical(m$mode, "local")) "local (Redis unreachable: local rules)" else m$mode
  list(text = "fleet-shared",
       tooltip = paste0("shared by a fleet through Redis ", store$url, ", prefix ", store$prefix,
                        "; mode: ", mode))
}

#' @exportS3Method
store_unlink.circuit_breaker_store_redis <- function(store, name, call) redis_store_unlink(name, store, call)

# The connection details that identify the sync thread of `store` in this
# process (one per store, whatever the breaker). The clock offset is a test
# hook: CIRCUITBREAKER_TEST_CLOCK_OFFSET (seconds) skews this process's
# clock, to show that the hosts' clocks do not matter.
redis_store_spec <- function(store) {
  offset <- suppressWarnings(as.numeric(Sys.getenv("CIRCUITBREAKER_TEST_CLOCK_OFFSET", "0")))
  if (!isTRUE(is.finite(offset))) offset <- 0
  list(url = store$secret$url, prefix = store$prefix, sync_interval = store$sync_interval,
       timeout = store$timeout, clock_offset = offset, sentinels = store$sentinel,
       master = store$master, sentinel_password = store$secret$sentinel_password, tls = store$tls)
}

# The fleet fields of $metrics() for a Redis breaker.
#' @exportS3Method
store_metrics.circuit_breaker_store_redis <- function(store, ptr) {
  info <- cb_fleet_info(ptr)
  list(
    mode = info$mode,
    sync_lag = info$sync_lag,
    last_sync = if (is.na(info$last_sync)) as.POSIXct(NA) else as.POSIXct(info$last_sync, origin = "1970-01-01"),
    fleet_calls = info$fleet_calls,
    fleet_failures = info$fleet_failures,
    last_error = link_error(info$last_error),
    topology = info$topology,
    master = if (nzchar(info$master)) info$master else NA_character_,
    masters = info$masters,
    tls = info$tls
  )
}

# The last error of a store's link as shown (metrics, print): NA for none,
# else cut to 200 characters (it may be a long reply of the server; the
# password was removed by the core).
link_error <- function(x) if (nzchar(x)) cut_text(x, 200L) else NA_character_

# The fleet fields of a breaker that is not a fleet breaker (breaker_list()).
#' @exportS3Method
store_metrics_na.circuit_breaker_store_redis <- function(store) {
  list(mode = NA_character_, sync_lag = NA_real_, last_sync = as.POSIXct(NA),
       fleet_calls = NA_real_, fleet_failures = NA_real_, last_error = NA_character_,
       topology = NA_character_, master = NA_character_, masters = NA_real_, tls = NA_character_)
}

# The status routes show the link, not the fleet's counts.
#' @exportS3Method
store_status_fields.circuit_breaker_store_redis <- function(store) {
  c("mode", "sync_lag", "last_sync", "last_error", "topology", "master", "masters", "tls")
}

#' @exportS3Method
store_prometheus_families.circuit_breaker_store_redis <- function(store) {
  list(
    list(name = "circuitbreaker_fleet_mode", type = "gauge",
         help = paste("Fleet breakers (Redis store): 1 for the current mode, fleet (in step with Redis)",
                      "or local (Redis unreachable: local rules), 0 for the other."),
         label = "mode",
         samples = function(m) stats::setNames(as.numeric(c("fleet", "local") == m$mode), c("fleet", "local"))),
    list(name = "circuitbreaker_fleet_sync_lag_seconds", type = "gauge",
         help = "Fleet breakers (Redis store): seconds since the last good sync with Redis (NaN before the first).",
         samples = function(m) prom_field(m, "sync_lag")),
    list(name = "circuitbreaker_fleet_last_sync_timestamp_seconds", type = "gauge",
         help = paste("Fleet breakers (Redis store): the time of the last good sync with Redis,",
                      "in seconds since the epoch."),
         samples = function(m) prom_field(m, "last_sync")),
    # An info-style gauge: the version is a label, so that a plain store, or
    # one whose handshakes fell back to TLSv1.2, is one query away.
    list(name = "circuitbreaker_fleet_tls", type = "gauge",
         help = paste("Fleet breakers (Redis store): 1, labelled with the TLS version of the link's last handshake",
                      "(TLSv1.3, TLSv1.2), on (TLS before the first handshake) or off (a plain redis:// store)."),
         label = "version",
         samples = function(m) {
           if (!rlang::is_string(m$tls)) return(numeric())
           stats::setNames(1, prom_escape_label(m$tls))
         })
  )
}
# nolint end

#' @export
format.circuit_breaker_store_redis <- function(x, ...) {
  e <- x$endpoint
  user <- if (isTRUE(e$has_username)) "***" else ""
  auth <- if (isTRUE(e$has_password)) paste0(user, ":***@") else if (nzchar(user)) "***@" else ""
  host <- if (grepl(":", e$host, fixed = TRUE)) paste0("[", e$host, "]") else e$host
  seeds <- if (is.null(e$seeds)) 1L else e$seeds
  scheme <- if (is.null(x$tls)) "redis://" else "rediss://"
  where <- if (is.null(x$sentinel) && seeds == 1L) paste0(scheme, auth, host, ":", e$port, "/", e$db) else x$url
  out <- paste0("<circuit_breaker_store: redis, ", where, ", prefix ", x$prefix, ">")
  # The link of this process, once a breaker of the store has started it.
  link <- if (cb_redis_available()) cb_fleet_store_info(redis_store_spec(x))
  if (!is.null(link)) {
    out <- c(out, paste0("  mode: ", link$mode, "   syncs: ", link$syncs,
                         "   failed: ", link$sync_failures, "   tls: ", link$tls),
             paste0("  topology: ", redis_topology_text(link$topology, link$master, link$masters)))
    error <- link_error(link$last_error)
    if (!is.na(error)) out <- c(out, paste0("  last error: ", error))
  }
  out
}

# "single (127.0.0.1:6379)", "sentinel (master 127.0.0.1:6380)",
# "sentinel (no master found yet)", "cluster (3 masters)" or, for a
# breaker, "cluster (3 masters; this breaker's: 127.0.0.1:7001)".
redis_topology_text <- function(topology, master, masters = NA) {
  known <- !is.na(master) && nzchar(master)
  switch(topology,
         cluster = paste0("cluster (", masters, if (identical(masters, 1)) " master" else " masters",
                          if (known) paste0("; this breaker's: ", master), ")"),
         sentinel = paste0("sentinel (", if (known) paste("master", master) else "no master found yet", ")"),
         paste0(topology, if (known) paste0(" (", master, ")")))
}

abort_redis_unavailable <- function(value = NULL, call = NULL) {
  abort_store(
    "unavailable",
    c("The Redis store needs hiredis, which this installation of circuitbreaker was built without.",
      i = paste("Install it (Debian/Ubuntu: {.code apt-get install libhiredis-dev};",
                "Fedora: {.code dnf install hiredis-devel}; macOS: {.code brew install hiredis}),",
                "then install circuitbreaker again.")),
    call = call
  )
}

# Raised by the binding when the fleet keeps breaker `name` with other rule
# arguments than this process gave.
# `given` and `stored` are that argument's values (the core's text) in this
# process and in the fleet.
abort_fleet_wrong_config <- function(name, argument = NULL, given = NULL, stored = NULL, call = NULL) {
  abort_wrong_config(
    "Fleet breaker {.val {name}}", "the fleet uses",
    "or remove the breaker's keys with {.fn breaker_store_unlink} once no process uses it.",
    argument, given, stored, call = call
  )
}

# Tells, once, that a fleet store of this process is alone (its link to
# Redis never came up, or has been down for a few sync intervals: the core
# decides, FleetSync::Stats::alone), and, once, that it has rejoined. It is
# asked where a call already goes through R and costs no call anything: a
# fleet breaker's creation, `$metrics()` (so breaker_list(), the status
# routes and the Prometheus metrics) and the later poll of a breaker with
# listeners (breaker-events.R). One .Call and a lookup; what was said last is
# kept per store (by a hash of its connection details, which hold the
# password: the hash does not).
fleet_link_news <- function(store) {
  spec <- redis_store_spec(store)
  info <- cb_fleet_store_info(spec)
  if (is.null(info)) return(invisible())
  said <- the$fleet_alone %||% (the$fleet_alone <- new.env(parent = emptyenv()))
  key <- rlang::hash(spec)
  was_alone <- isTRUE(said[[key]])
  if (!was_alone && isTRUE(info$alone)) {
    said[[key]] <- TRUE
    warning(store_alone_warning(store, sub("[.]$", "", link_error(info$last_error))))
  } else if (was_alone && identical(info$mode, "fleet")) {
    said[[key]] <- FALSE
    message(store_rejoined_message(store))
  }
  invisible()
}

# A warning, not a message: the store was asked to share its breakers and
# does not, which is a fault of the set-up (a typo in the URL, a firewall, a
# Redis down) that belongs in the log next to the other warnings; a message
# is easily silenced (suppressMessages(), quiet = TRUE) and would hide it.
# Its class says which condition it is, as the package's warnings do
# (circuit_breaker_listener_error); `circuit_breaker_warning` lets a handler
# take them all.
store_alone_warning <- function(store, reason) {
  structure(
    class = c("circuit_breaker_store_alone", "circuit_breaker_warning", "warning", "condition"),
    list(
      message = paste0(
        "The Redis store ", store$url, " (prefix \"", store$prefix, "\") cannot reach Redis",
        if (!is.na(reason)) paste0(": ", reason) else "", ".\n",
        "Its breakers run on this process's local rules (mode \"local\") until it rejoins; ",
        "check the URL and that the server answers (`breaker_store_redis_ping()`)."
      ),
      call = NULL,
      url = store$url,
      prefix = store$prefix,
      reason = reason
    )
  )
}

store_rejoined_message <- function(store) {
  structure(
    class = c("circuit_breaker_store_rejoined", "circuit_breaker_message", "message", "condition"),
    list(
      message = paste0("The Redis store ", store$url, " (prefix \"", store$prefix,
                       "\") reaches Redis again: its breakers are shared by the fleet (mode \"fleet\").\n"),
      call = NULL,
      url = store$url,
      prefix = store$prefix
    )
  )
}

# breaker_store_unlink() for a fleet store: this host's file of the
# breaker's bulkhead permits (the core names it: fleet_bulkhead_file_name()),
# removed as the host store removes its files, first, since Redis may not
# answer; then one DEL of every key of the breaker (the core lists them:
# fleet_breaker_keys()), on a connection of its own. TRUE when there was
# something to remove.
redis_store_unlink <- function(name, store, call) {
  if (!cb_redis_available()) abort_redis_unavailable(call = call)
  spec <- store_location(store, name, call = call)
  segment <- cb_fleet_bulkhead_path(spec)
  removed <- file.exists(segment) && unlink(segment) == 0L && !file.exists(segment)
  (cb_fleet_unlink(spec) > 0) || removed
}

# Raised by the binding when a fleet breaker's keys could not be removed.
abort_fleet_unreachable <- function(name, reason, call = NULL) {
  abort_store(
    "unreachable",
    c("Cannot remove the keys of fleet breaker {.val {name}}: Redis did not answer.",
      x = "{reason}",
      i = "Check the store's URL and that the server answers ({.fn breaker_store_redis_ping})."),
    breaker = name,
    reason = reason,
    call = call
  )
}
