//! cargo-fuzz target: `tandem::fuzzing::job_secret`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tandem::fuzzing::job_secret(data));
