//! Any JSON as a contract, and as an instance of itself: checking, validating and projecting
//! must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else { return };
    let _ = mmo_contract::check_schema(&v);
    let _ = mmo_contract::project_output_schema(&v);
    if let Ok(c) = mmo_contract::Contract::new(v.clone()) {
        let _ = c.validate(&v);
    }
});
