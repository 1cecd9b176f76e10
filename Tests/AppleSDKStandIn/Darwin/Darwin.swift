// A stand-in `Darwin` module for Tests/AppleSDKStandIn/check.sh, and nothing else: its only job is to make
// `canImport(Darwin)` true, so the check compiles the Apple-platform branches of Keystone's sources on Linux.
// Foundation, Dispatch and the C library still come from the Linux toolchain.
//
// Never add this directory to Package.swift: a `Darwin` module in a normal build would switch every
// `#if canImport(Darwin)` of the package (and of its dependencies) to code that cannot run on Linux.
