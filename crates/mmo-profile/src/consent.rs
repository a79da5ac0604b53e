//! Where the operator's credentials may go. A catalog route names a credential by variable
//! (`credential_env`) and a gateway (`base_url`); Codex then sends that variable's value to that
//! gateway. A pack is someone else's code: it may add routes, but it may not choose where the
//! operator's `OPENAI_API_KEY` is sent. A route's credential may go only to an origin a
//! built-in route already sends that same variable to, or to one the operator allowed in
//! `$XDG_CONFIG_HOME/codex-mmo/credentials.toml`:
//!
//! ```toml
//! [[allow]]
//! credential_env = "OPENAI_API_KEY"
//! origin = "https://gateway.example.com"   # scheme://host[:port], nothing else
//! ```
//!
//! The check runs when a pack is validated (a diagnostic) and again when a supervisor loads a
//! snapshot (a snapshot compiled before the operator withdrew consent does not run).

use crate::catalog::{Catalog, Route};
use crate::diag::{Diags, Rejected};
use crate::strict::{Tbl, parse_table};
use crate::toolmcp::is_env_name;
use std::collections::BTreeSet;
use std::path::Path;

/// The operator's own file, in the configuration directory.
pub const CONSENT_FILE: &str = "credentials.toml";

/// The (variable, origin) pairs the operator allowed beyond the built-in routes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Consent {
    allowed: BTreeSet<(String, String)>,
}

/// The ASCII origin (`scheme://host[:port]`, default ports dropped) of an `http`/`https` URL.
pub fn origin_of(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    if !matches!(u.scheme(), "http" | "https") || u.host().is_none() {
        return None;
    }
    Some(u.origin().ascii_serialization())
}

impl Consent {
    /// Load `dir/credentials.toml`; a missing file allows nothing beyond the built-in routes.
    pub fn load(dir: &Path) -> Result<Consent, Rejected> {
        let path = dir.join(CONSENT_FILE);
        let file = path.display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Consent::default()),
            Err(e) => {
                return Err(Rejected::one(file, "", "consent_unreadable", e.to_string()));
            }
        };
        let mut d = Diags::default();
        let consent = Consent::parse(&file, &text, &mut d);
        if d.is_empty() {
            Ok(consent)
        } else {
            d.attach_lines(&file, &text);
            Err(Rejected(d.into_sorted()))
        }
    }

    /// Parse the file's text, reporting every problem in `d`.
    pub fn parse(file: &str, text: &str, d: &mut Diags) -> Consent {
        let mut consent = Consent::default();
        let Some(table) = parse_table(file, text, d) else {
            return consent;
        };
        let t = Tbl::new(file, "", &table);
        for entry in t.table_array(d, "allow").unwrap_or_default() {
            let env = entry.req_str(d, "credential_env");
            let origin = entry.req_str(d, "origin");
            if let Some(e) = &env
                && !is_env_name(e)
            {
                entry.err(
                    d,
                    "credential_env",
                    "consent_credential_env",
                    "credential_env names an environment variable (A-Z, 0-9, _)",
                );
            }
            if let Some(o) = &origin
                && origin_of(o).as_deref() != Some(o.trim_end_matches('/'))
            {
                entry.err(
                    d,
                    "origin",
                    "consent_origin",
                    format!(
                        "`{o}` is not an origin: write scheme://host[:port] (http or https), \
                         lowercase, without a default port, path, query or user"
                    ),
                );
            }
            entry.finish(d);
            if let (Some(e), Some(o)) = (env, origin) {
                consent
                    .allowed
                    .insert((e, o.trim_end_matches('/').to_string()));
            }
        }
        t.finish(d);
        consent
    }

    /// Allow one (variable, origin) pair (for tests and embedders).
    pub fn allow(mut self, credential_env: &str, origin: &str) -> Consent {
        self.allowed
            .insert((credential_env.to_string(), origin.to_string()));
        self
    }

    /// Report every route of `catalog` that would send a credential somewhere neither a
    /// built-in route nor the operator sends it (in `file`, at `routes.<id>.base_url`).
    pub fn check(&self, catalog: &Catalog, file: &str, d: &mut Diags) {
        let builtin = Catalog::builtin();
        for (id, route) in &catalog.routes {
            if let Some(problem) = self.refusal(&builtin, route) {
                d.push(
                    file,
                    format!("routes.{id}.base_url"),
                    "catalog_credential_destination",
                    problem,
                );
            }
        }
    }

    /// Why `route` may not carry its credential, if it may not.
    fn refusal(&self, builtin: &Catalog, route: &Route) -> Option<String> {
        // A route Codex serves itself (a `provider`) gets no `env_key` from us.
        if route.provider.is_some() {
            return None;
        }
        let env = route.credential_env.as_deref()?;
        let url = route.base_url.as_deref().unwrap_or("");
        let Some(origin) = origin_of(url) else {
            return Some(format!(
                "`{url}` is not an http(s) URL, so `{env}` cannot be sent there"
            ));
        };
        let builtin_sends = builtin.routes.values().any(|b| {
            b.provider.is_none()
                && b.credential_env.as_deref() == Some(env)
                && b.base_url.as_deref().and_then(origin_of).as_deref() == Some(origin.as_str())
        });
        if builtin_sends || self.allowed.contains(&(env.to_string(), origin.clone())) {
            return None;
        }
        Some(format!(
            "this route would send the operator's `{env}` to {origin}, where no built-in route \
             sends it; the operator allows that with `[[allow]] credential_env = \"{env}\"` and \
             `origin = \"{origin}\"` in {CONSENT_FILE} of the codex-mmo configuration directory"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(base_url: &str, env: &str) -> Route {
        let mut r = Catalog::builtin()
            .routes
            .values()
            .find(|r| r.provider.is_none())
            .cloned()
            .unwrap();
        r.base_url = Some(base_url.into());
        r.credential_env = Some(env.into());
        r
    }

    #[test]
    fn origins_are_normalized_and_only_http() {
        assert_eq!(
            origin_of("HTTPS://Gateway.Example.com:443/v1").as_deref(),
            Some("https://gateway.example.com")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:4318/x").as_deref(),
            Some("http://127.0.0.1:4318")
        );
        assert_eq!(origin_of("file:///etc/passwd"), None);
        assert_eq!(origin_of("not a url"), None);
    }

    #[test]
    fn a_builtin_destination_passes_and_any_other_needs_consent() {
        let builtin = Catalog::builtin();
        let none = Consent::default();
        let same = route("http://127.0.0.1:4318/elsewhere/v1", "OPENCODE_ZEN_API_KEY");
        assert_eq!(
            none.refusal(&builtin, &same),
            None,
            "same origin, same variable"
        );
        let evil = route("https://collector.example/v1", "OPENAI_API_KEY");
        let why = none.refusal(&builtin, &evil).unwrap();
        assert!(why.contains("OPENAI_API_KEY") && why.contains("https://collector.example"));
        let swapped = route("http://127.0.0.1:4318/v1", "OPENAI_API_KEY");
        assert!(
            none.refusal(&builtin, &swapped).is_some(),
            "a built-in origin does not take another variable"
        );
        let allowed = none.allow("OPENAI_API_KEY", "https://collector.example");
        assert_eq!(allowed.refusal(&builtin, &evil), None);
        assert!(
            allowed
                .refusal(
                    &builtin,
                    &route("https://collector.example:8443/", "OPENAI_API_KEY")
                )
                .is_some(),
            "another port is another origin"
        );
    }

    #[test]
    fn the_file_is_strict() {
        let mut d = Diags::default();
        let c = Consent::parse(
            "credentials.toml",
            "[[allow]]\ncredential_env = \"OPENAI_API_KEY\"\norigin = \"https://gw.example\"\n",
            &mut d,
        );
        assert!(d.is_empty(), "{:?}", d.into_sorted());
        assert_eq!(
            c,
            Consent::default().allow("OPENAI_API_KEY", "https://gw.example")
        );
        let mut d = Diags::default();
        Consent::parse(
            "credentials.toml",
            "[[allow]]\ncredential_env = \"k\"\norigin = \"https://gw.example/v1\"\nextra = 1\n[other]\n",
            &mut d,
        );
        let rules: Vec<_> = d.into_sorted().into_iter().map(|x| x.rule).collect();
        for rule in [
            "consent_credential_env",
            "consent_origin",
            "toml_unknown_field",
        ] {
            assert!(rules.contains(&rule), "{rule} in {rules:?}");
        }
    }
}
