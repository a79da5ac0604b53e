//! The three string formats the subset supports, checked exactly as their RFCs define them.

/// RFC 3339 `full-date`.
pub fn is_date(s: &str) -> bool {
    parse_date(s.as_bytes()).is_some()
}

fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0')))
}

fn parse_date(b: &[u8]) -> Option<(u32, u32, u32)> {
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y = digits(&b[0..4])?;
    let m = digits(&b[5..7])?;
    let d = digits(&b[8..10])?;
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let dim = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (d >= 1 && d <= dim).then_some((y, m, d))
}

/// RFC 3339 `date-time`: a time zone is required; `t`/`z` may be lowercase; a leap second is
/// accepted only where it can occur, at 23:59:60 UTC.
pub fn is_date_time(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 20 || !matches!(b[10], b'T' | b't') || parse_date(&b[..10]).is_none() {
        return false;
    }
    let t = &b[11..];
    if t.len() < 9 || t[2] != b':' || t[5] != b':' {
        return false;
    }
    let (Some(h), Some(mi), Some(sec)) = (digits(&t[0..2]), digits(&t[3..5]), digits(&t[6..8]))
    else {
        return false;
    };
    if h > 23 || mi > 59 || sec > 60 {
        return false;
    }
    let mut rest = &t[8..];
    if rest.first() == Some(&b'.') {
        let n = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &rest[1 + n..];
    }
    let offset_minutes: i64 = match rest {
        [b'Z'] | [b'z'] => 0,
        [sign @ (b'+' | b'-'), oh1, oh2, b':', om1, om2] => {
            let (Some(oh), Some(om)) = (digits(&[*oh1, *oh2]), digits(&[*om1, *om2])) else {
                return false;
            };
            if oh > 23 || om > 59 {
                return false;
            }
            let v = i64::from(oh * 60 + om);
            if *sign == b'+' { v } else { -v }
        }
        _ => return false,
    };
    if sec == 60 {
        let utc = (i64::from(h * 60 + mi) - offset_minutes).rem_euclid(24 * 60);
        return utc == 23 * 60 + 59;
    }
    true
}

fn unreserved(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~')
}
fn sub_delim(c: u8) -> bool {
    matches!(
        c,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

/// Every byte is allowed by `extra` or is a valid percent-encoding.
fn chars_ok(b: &[u8], extra: impl Fn(u8) -> bool) -> bool {
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'%' {
            if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                return false;
            }
            i += 3;
            continue;
        }
        if !(unreserved(c) || sub_delim(c) || extra(c)) {
            return false;
        }
        i += 1;
    }
    true
}

fn pchar_extra(c: u8) -> bool {
    c == b':' || c == b'@'
}

/// An absolute RFC 3986 `URI` (scheme required; fragment allowed; relative references rejected).
pub fn is_uri(s: &str) -> bool {
    let b = s.as_bytes();
    let Some(colon) = b.iter().position(|&c| c == b':') else {
        return false;
    };
    let scheme = &b[..colon];
    if scheme.is_empty()
        || !scheme[0].is_ascii_alphabetic()
        || !scheme
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
    {
        return false;
    }
    let mut rest = &b[colon + 1..];
    if let Some(h) = rest.iter().position(|&c| c == b'#') {
        if !chars_ok(&rest[h + 1..], |c| pchar_extra(c) || c == b'/' || c == b'?') {
            return false;
        }
        rest = &rest[..h];
    }
    if let Some(q) = rest.iter().position(|&c| c == b'?') {
        if !chars_ok(&rest[q + 1..], |c| pchar_extra(c) || c == b'/' || c == b'?') {
            return false;
        }
        rest = &rest[..q];
    }
    let path = if let Some(after) = rest.strip_prefix(b"//") {
        let end = after.iter().position(|&c| c == b'/').unwrap_or(after.len());
        if !authority_ok(&after[..end]) {
            return false;
        }
        &after[end..]
    } else {
        rest
    };
    chars_ok(path, |c| pchar_extra(c) || c == b'/')
}

fn authority_ok(a: &[u8]) -> bool {
    let (userinfo, hostport) = match a.iter().rposition(|&c| c == b'@') {
        Some(i) => (Some(&a[..i]), &a[i + 1..]),
        None => (None, a),
    };
    if let Some(u) = userinfo
        && !chars_ok(u, |c| c == b':')
    {
        return false;
    }
    let (host, port) = if hostport.first() == Some(&b'[') {
        let Some(close) = hostport.iter().position(|&c| c == b']') else {
            return false;
        };
        let lit = &hostport[1..close];
        if !ip_literal_ok(lit) {
            return false;
        }
        let after = &hostport[close + 1..];
        match after {
            [] => (&[][..], None),
            [b':', p @ ..] => (&[][..], Some(p)),
            _ => return false,
        }
    } else {
        match hostport.iter().rposition(|&c| c == b':') {
            Some(i) => (&hostport[..i], Some(&hostport[i + 1..])),
            None => (hostport, None),
        }
    };
    if let Some(p) = port
        && !p.iter().all(u8::is_ascii_digit)
    {
        return false;
    }
    chars_ok(host, |_| false)
}

fn ip_literal_ok(lit: &[u8]) -> bool {
    if lit.is_empty() {
        return false;
    }
    if matches!(lit[0], b'v' | b'V') {
        let Some(dot) = lit.iter().position(|&c| c == b'.') else {
            return false;
        };
        return dot > 1
            && lit[1..dot].iter().all(u8::is_ascii_hexdigit)
            && dot + 1 < lit.len()
            && lit[dot + 1..]
                .iter()
                .all(|&c| unreserved(c) || sub_delim(c) || c == b':');
    }
    std::str::from_utf8(lit).is_ok_and(|s| s.parse::<std::net::Ipv6Addr>().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_follow_the_calendar() {
        assert!(is_date("2024-02-29"));
        assert!(!is_date("2023-02-29"));
        assert!(!is_date("1900-02-29"));
        assert!(is_date("2000-02-29"));
        assert!(!is_date("2024-13-01"));
        assert!(!is_date("2024-1-01"));
        assert!(!is_date("2024-04-31"));
    }

    #[test]
    fn date_times_need_a_zone_and_allow_lowercase_and_leap_seconds() {
        assert!(is_date_time("1985-04-12T23:20:50.52Z"));
        assert!(is_date_time("1985-04-12t23:20:50z"));
        assert!(is_date_time("1996-12-19T16:39:57-08:00"));
        assert!(is_date_time("1998-12-31T23:59:60Z"));
        assert!(is_date_time("1998-12-31T15:59:60-08:00"));
        assert!(!is_date_time("1998-12-31T22:59:60Z"));
        assert!(!is_date_time("1985-04-12T23:20:50"));
        assert!(!is_date_time("1985-04-12 23:20:50Z"));
        assert!(!is_date_time("1985-04-12T24:00:00Z"));
        assert!(!is_date_time("1985-04-12T23:20:50.Z"));
        assert!(!is_date_time("1985-04-12T23:20:50+24:00"));
    }

    #[test]
    fn uris_must_be_absolute_and_well_encoded() {
        assert!(is_uri("https://example.com/a/b?c=d#frag"));
        assert!(is_uri("urn:isbn:0451450523"));
        assert!(is_uri("mailto:someone@example.com"));
        assert!(is_uri("http://[2001:db8::1]:8080/x"));
        assert!(is_uri("file:///etc/hosts"));
        assert!(is_uri("http://a/%20b"));
        assert!(!is_uri("/relative/path"));
        assert!(!is_uri("//example.com/x"));
        assert!(!is_uri("http://a/%zz"));
        assert!(!is_uri("http://a/%2"));
        assert!(!is_uri("http://a/b c"));
        assert!(!is_uri("http://a/ü"));
        assert!(!is_uri("1http://a"));
        assert!(!is_uri("http://a:80x/"));
        assert!(!is_uri("http://[zz::1]/"));
        assert!(!is_uri("http://a/#x#y"));
    }
}
