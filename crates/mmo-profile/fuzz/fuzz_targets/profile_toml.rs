//! Any profile.toml text, inside an otherwise valid pack, must validate or be diagnosed; a
//! panic anywhere in parsing, validation or compilation is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mmo_profile::pack::Pack;
use mmo_profile::consent::Consent;
use mmo_profile::toolmcp::Registry;
use std::collections::BTreeMap;

const LEAD: &[u8] = b"Lead instructions.\n";
const REVIEW: &[u8] = br#"{"type":"object","required":["verdict"],"properties":{"verdict":{"enum":["ok"]}}}"#;

fuzz_target!(|data: &[u8]| {
    let mut files = BTreeMap::new();
    files.insert("profile.toml".to_string(), data.to_vec());
    files.insert("agents/lead.md".to_string(), LEAD.to_vec());
    files.insert("contracts/review.json".to_string(), REVIEW.to_vec());
    let pack = Pack { files };
    if let Ok(v) = mmo_profile::validate::validate(&pack, &Registry::default(), &Consent::default(), &[]) {
        let _ = mmo_profile::compile::compile(&pack, &v);
    }
});
