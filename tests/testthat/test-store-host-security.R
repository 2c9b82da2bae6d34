# The host store against a hostile local user (breaker_store_host(), "Security"):
# a real throwaway user plants links, empty files, copied segments and FIFOs
# in a store directory made like /dev/shm before this process creates its
# breakers; nothing of theirs is followed, adopted or written.

test_that("files planted by another user are refused and left alone; our breakers keep working", {
  attacker <- local_attacker()
  dir <- local_shared_directory()
  store <- breaker_store_host(dir)
  file_of <- function(name) file.path(dir, circuitbreaker:::cb_segment_file_name(name))
  mine <- local_shared_breaker(store, "mine", host_args())
  mine$execute(function() stop("down"), function() "fallback")

  # A file of ours that a link points at, in a directory the attacker cannot read.
  target <- withr::local_tempfile(lines = c("precious", "contents"))
  before <- unname(tools::md5sum(target))
  never <- withr::local_tempfile()  # a dangling link's target: must not appear
  as_attacker(attacker, sprintf("ln -s %s %s", target, file_of("link")))
  as_attacker(attacker, sprintf("ln -s %s %s", never, file_of("dangling")))
  as_attacker(attacker, sprintf("touch %s && chmod 0666 %s", file_of("empty"), file_of("empty")))
  as_attacker(attacker, sprintf("mkfifo -m 0666 %s", file_of("fifo")))
  # A well-formed segment of ours, copied into a file of the attacker's.
  local_shared_breaker(store, "template", host_args())
  file.copy(file_of("template"), file_of("copied"))
  expect_identical(system2("chown", c(paste0(attacker$uid, ":", attacker$gid), file_of("copied"))), 0L)
  # And the key of a breaker_for() breaker.
  key_file <- file_of("127.0.0.1:9")
  as_attacker(attacker, sprintf("touch %s && chmod 0600 %s", shQuote(key_file), shQuote(key_file)))

  reasons <- c(link = "symbolic link", dangling = "symbolic link", empty = paste("owned by uid", attacker$uid),
               fifo = "a FIFO, not a regular file", copied = paste("owned by uid", attacker$uid))
  for (name in names(reasons)) {
    err <- expect_untrusted(circuit_breaker(name = name, store = store, failure_threshold = 5,
                                            recovery_timeout = 30))
    expect_identical(err$path, file_of(name))
    expect_match(conditionMessage(err), basename(file_of(name)), fixed = TRUE)
    expect_match(conditionMessage(err), reasons[[name]], fixed = TRUE)
  }
  err <- expect_untrusted(breaker_for("http://127.0.0.1:9/x", store = store))
  expect_identical(err$path, key_file)

  # Nothing of theirs was changed, nothing created through a link.
  expect_identical(unname(tools::md5sum(target)), before)
  expect_false(file.exists(never))
  expect_identical(file.size(file_of("empty")), 0)
  expect_identical(as.character(file.info(file_of("empty"))$mode), "666")
  expect_identical(file.info(file_of("copied"))$uid, as.integer(attacker$uid))
  expect_identical(Sys.readlink(file_of("link")), target)

  # Our breakers are untouched and keep working.
  expect_identical(mine$execute(function() "ok"), "ok")
  expect_identical(mine$metrics()$calls, 2)
  # The listing reads nothing of theirs: each planted file is "untrusted".
  seg <- breaker_store_segments(store)
  status <- stats::setNames(seg$status, seg$name)
  expect_identical(status[["mine"]], "ok")
  expect_identical(status[["template"]], "ok")
  for (name in c(names(reasons), "127.0.0.1:9")) {
    expect_match(status[[name]], "^untrusted: ", label = name)
  }
  expect_identical(unname(tools::md5sum(target)), before)
  expect_false(file.exists(never))

  hide <- function(x) gsub(attacker$uid, "<uid>", gsub(dir, "<store>", x, fixed = TRUE), fixed = TRUE)
  expect_snapshot(error = TRUE, transform = hide, {
    circuit_breaker(name = "link", store = store)
  })
  expect_snapshot(error = TRUE, transform = hide, {
    circuit_breaker(name = "copied", store = store, failure_threshold = 5, recovery_timeout = 30)
  })
})

test_that("a file of ours with group/other permissions or behind a link is refused", {
  store <- local_host_store()
  file_of <- function(name) file.path(store$path, circuitbreaker:::cb_segment_file_name(name))
  loose <- local_shared_breaker(store, "loose", host_args())
  breaker_remove("loose")
  Sys.chmod(file_of("loose"), "0644", use_umask = FALSE)
  err <- expect_untrusted(circuit_breaker(name = "loose", store = store, failure_threshold = 5,
                                          recovery_timeout = 30))
  expect_match(conditionMessage(err), "mode 0644 has group/other permission bits", fixed = TRUE)
  expect_snapshot(error = TRUE, transform = function(x) gsub(store$path, "<store>", x, fixed = TRUE), {
    circuit_breaker(name = "loose", store = store, failure_threshold = 5, recovery_timeout = 30)
  })
  # Our own link to our own segment is a link all the same.
  file.symlink(file_of("loose"), file_of("alias"))
  expect_untrusted(circuit_breaker(name = "alias", store = store))
  seg <- breaker_store_segments(store)
  expect_identical(seg$status[seg$name == "alias"], "untrusted: it is a symbolic link")
  expect_match(seg$status[seg$name == "loose"], "^untrusted: its mode 0644")
  # A second name for one segment (a hard link) would make two breakers one.
  local_shared_breaker(store, "single", host_args())
  expect_true(file.link(file_of("single"), file_of("twin")))
  err <- expect_untrusted(circuit_breaker(name = "twin", store = store, failure_threshold = 5,
                                          recovery_timeout = 30))
  expect_match(conditionMessage(err), "it has 2 hard links", fixed = TRUE)
  # A segment made here is 0600, whatever the umask.
  umask <- Sys.umask("000")
  made <- tryCatch(local_shared_breaker(store, "made", host_args()), finally = Sys.umask(umask))
  expect_identical(as.character(file.info(file_of("made"))$mode), "600")
})

test_that("store directories that another user can change are refused", {
  attacker <- local_attacker()
  dir <- local_shared_directory()
  # A directory of theirs (even one we may write to).
  theirs <- file.path(dir, "theirs")
  as_attacker(attacker, sprintf("mkdir -m 0777 %s", theirs))
  err <- expect_untrusted(breaker_store_host(theirs))
  expect_identical(err$path, theirs)
  expect_match(conditionMessage(err), paste("owned by uid", attacker$uid), fixed = TRUE)
  # A link of theirs to a directory of ours.
  ours <- file.path(dir, "ours")
  dir.create(ours, mode = "0700")
  as_attacker(attacker, sprintf("ln -s %s %s", ours, file.path(dir, "redirect")))
  err <- expect_untrusted(breaker_store_host(file.path(dir, "redirect")))
  expect_match(conditionMessage(err), "symbolic link owned by uid", fixed = TRUE)
  # A directory of ours that others may write to without the sticky bit.
  open_dir <- file.path(dir, "open")
  dir.create(open_dir)
  Sys.chmod(open_dir, "0777", use_umask = FALSE)
  err <- expect_untrusted(breaker_store_host(open_dir))
  expect_match(conditionMessage(err), "mode 0777 lets group or others write in it without the sticky bit",
               fixed = TRUE)
  # With the sticky bit (like /dev/shm), and our own private one, it is fine.
  Sys.chmod(open_dir, "1777", use_umask = FALSE)
  expect_s3_class(breaker_store_host(open_dir), "circuit_breaker_store_host")
  store <- breaker_store_host(ours)
  # A directory that became unsafe after its store was made: refused when
  # a breaker is created, naming the directory.
  Sys.chmod(ours, "0777", use_umask = FALSE)
  err <- expect_untrusted(circuit_breaker(name = "later", store = store))
  expect_identical(err$path, ours)
  expect_false(file.exists(file.path(ours, "cb-later")))
})

test_that("the default store is a private directory of this user under /dev/shm", {
  skip_if_not(circuitbreaker:::cb_host_supported(), "host-shared breakers need Linux")
  skip_if_not(dir.exists("/dev/shm"), "no /dev/shm")
  default <- local_default_store_directory()
  store <- breaker_store_host()
  expect_identical(store$path, default$path)
  info <- file.info(default$path)
  expect_true(info$isdir)
  if (!default$existed) expect_identical(as.character(info$mode), "700")
  name <- paste0("default-store-test-", Sys.getpid())
  cb <- local_shared_breaker(store, name, host_args())
  withr::defer(breaker_store_unlink(name, store))
  expect_identical(cb$execute(function() "ok"), "ok")
  expect_true(name %in% breaker_store_segments(store)$name)
})

test_that("a default directory that another user made first is refused", {
  attacker <- local_attacker()
  default <- local_default_store_directory()
  skip_if(default$existed, paste(default$path, "exists already"))
  # Theirs, and writable for us: still not ours.
  as_attacker(attacker, sprintf("mkdir -m 0777 %s", default$path))
  err <- expect_untrusted(breaker_store_host())
  expect_identical(err$path, default$path)
  expect_match(conditionMessage(err), paste("owned by uid", attacker$uid), fixed = TRUE)
  expect_identical(system2("rmdir", default$path), 0L)
  # A link of theirs to a directory of theirs.
  shared <- local_shared_directory()
  elsewhere <- file.path(shared, "elsewhere")
  as_attacker(attacker, sprintf("mkdir -m 0700 %s && ln -s %s %s", elsewhere, elsewhere, default$path))
  err <- expect_untrusted(breaker_store_host())
  expect_match(conditionMessage(err), "symbolic link", fixed = TRUE)
  expect_identical(length(list.files(elsewhere, all.files = TRUE, no.. = TRUE)), 0L)
  unlink(default$path)
  # Gone: the default store makes its own.
  expect_s3_class(breaker_store_host(), "circuit_breaker_store_host")
  expect_identical(as.character(file.info(default$path)$mode), "700")
})
