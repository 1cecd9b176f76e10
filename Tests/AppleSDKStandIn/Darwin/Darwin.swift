// A stand-in `Darwin` module for Tests/AppleSDKStandIn/check.sh, and nothing else: its only job is to make
// `canImport(Darwin)` true, so the check compiles the Apple-platform branches of Keystone's sources on Linux.
// Foundation, Dispatch and the C library still come from the Linux toolchain.
//
// Never add this directory to Package.swift: a `Darwin` module in a normal build would switch every
// `#if canImport(Darwin)` of the package (and of its dependencies) to code that cannot run on Linux.

// The few Darwin-only C constants Keystone's Apple branches use, with Darwin's values (sys/param.h, sys/fcntl.h);
// the functions they are passed to (fcntl…) come from the Linux C library, which has the same signatures.
public let MAXPATHLEN: Int32 = 1024
public let F_GETPATH: Int32 = 50
