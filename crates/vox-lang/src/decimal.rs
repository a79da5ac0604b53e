//! `dec`: exact decimal numbers, as real Vox's (`rust_decimal`): an integer mantissa and a
//! base-10 scale of at most [`MAX_SCALE`], so `0.1dec + 0.2dec is 0.3dec` holds. Sums,
//! differences and products are exact (a product past the scale limit is rounded half to
//! even); quotients are rounded half to even at the scale limit. Overflow is an error, never
//! a wrapped value.

use std::cmp::Ordering;

/// Most digits after the point.
pub const MAX_SCALE: u32 = 28;
/// Largest mantissa (38 decimal digits fit in an `i128`).
const MAX_MANTISSA: i128 = 10i128.pow(38) - 1;

/// `mantissa / 10^scale`.
#[derive(Clone, Copy, Debug)]
pub struct Dec {
    /// Digits, sign included.
    pub mantissa: i128,
    /// Digits after the point.
    pub scale: u32,
}

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

fn checked(mantissa: i128, scale: u32) -> Option<Dec> {
    (mantissa.abs() <= MAX_MANTISSA && scale <= MAX_SCALE).then_some(Dec { mantissa, scale })
}

/// `n / d` rounded half to even (`d` non-zero).
fn div_round(n: i128, d: i128) -> i128 {
    let (q, r) = (n / d, n % d);
    let twice = r.unsigned_abs().saturating_mul(2);
    let away = match twice.cmp(&d.unsigned_abs()) {
        Ordering::Greater => true,
        Ordering::Equal => q % 2 != 0,
        Ordering::Less => false,
    };
    if !away {
        q
    } else if (n < 0) != (d < 0) {
        q - 1
    } else {
        q + 1
    }
}

impl Dec {
    /// From an integer.
    pub fn from_int(i: i64) -> Dec {
        Dec {
            mantissa: i as i128,
            scale: 0,
        }
    }

    /// Parses `-?digits[.digits]` (underscores allowed between digits); `None` when it is
    /// not such a number or does not fit.
    pub fn parse(text: &str) -> Option<Dec> {
        let (neg, body) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        if int.is_empty() || (body.contains('.') && frac.is_empty()) {
            return None;
        }
        let mut m: i128 = 0;
        let mut scale = 0u32;
        for (part, is_frac) in [(int, false), (frac, true)] {
            for c in part.chars() {
                if c == '_' {
                    continue;
                }
                let d = c.to_digit(10)? as i128;
                m = m.checked_mul(10)?.checked_add(d)?;
                if is_frac {
                    scale += 1;
                }
            }
        }
        checked(if neg { -m } else { m }, scale)
    }

    fn rescale(self, scale: u32) -> Option<i128> {
        self.mantissa
            .checked_mul(pow10(scale.checked_sub(self.scale)?)?)
    }

    /// `self + other`.
    pub fn checked_add(self, other: Dec) -> Option<Dec> {
        let s = self.scale.max(other.scale);
        checked(self.rescale(s)?.checked_add(other.rescale(s)?)?, s)
    }

    /// `self - other`.
    pub fn checked_sub(self, other: Dec) -> Option<Dec> {
        self.checked_add(Dec {
            mantissa: -other.mantissa,
            scale: other.scale,
        })
    }

    /// `self * other`.
    pub fn checked_mul(self, other: Dec) -> Option<Dec> {
        let mut m = self.mantissa.checked_mul(other.mantissa)?;
        let mut s = self.scale + other.scale;
        if s > MAX_SCALE {
            m = div_round(m, pow10(s - MAX_SCALE)?);
            s = MAX_SCALE;
        }
        checked(m, s)
    }

    /// `self / other`; `None` when `other` is zero or the quotient does not fit.
    pub fn checked_div(self, other: Dec) -> Option<Dec> {
        if other.mantissa == 0 {
            return None;
        }
        // The most digits after the point that the scaled dividend allows.
        for s in (0..=MAX_SCALE).rev() {
            let shift = s + other.scale;
            let Some(n) = shift
                .checked_sub(self.scale)
                .and_then(pow10)
                .and_then(|p| self.mantissa.checked_mul(p))
            else {
                continue;
            };
            let q = div_round(n, other.mantissa);
            return checked(q, s).map(Dec::trimmed);
        }
        None
    }

    /// `self % other` (the sign of `self`), `None` when `other` is zero.
    pub fn checked_rem(self, other: Dec) -> Option<Dec> {
        if other.mantissa == 0 {
            return None;
        }
        let s = self.scale.max(other.scale);
        checked(self.rescale(s)? % other.rescale(s)?, s)
    }

    /// Without trailing zeros after the point.
    fn trimmed(mut self) -> Dec {
        while self.scale > 0 && self.mantissa % 10 == 0 {
            self.mantissa /= 10;
            self.scale -= 1;
        }
        self
    }

    /// Numeric order (`1.0` equals `1.00`).
    pub fn numeric_cmp(self, other: Dec) -> Ordering {
        let s = self.scale.max(other.scale);
        match (self.rescale(s), other.rescale(s)) {
            (Some(a), Some(b)) => a.cmp(&b),
            _ => self.to_f64().total_cmp(&other.to_f64()),
        }
    }

    /// The nearest float.
    pub fn to_f64(self) -> f64 {
        self.mantissa as f64 / 10f64.powi(self.scale as i32)
    }

    /// Truncated toward zero, `None` past `i64`.
    pub fn to_i64(self) -> Option<i64> {
        i64::try_from(self.mantissa / pow10(self.scale)?).ok()
    }
}

impl std::fmt::Display for Dec {
    /// Digits with the scale kept (`8.250000` for `100.00dec * 0.0825dec`), as real Vox.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let digits = self.mantissa.unsigned_abs().to_string();
        let sign = if self.mantissa < 0 { "-" } else { "" };
        let scale = self.scale as usize;
        if scale == 0 {
            return write!(f, "{sign}{digits}");
        }
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (int, frac) = padded.split_at(padded.len() - scale);
        write!(f, "{sign}{int}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Dec {
        Dec::parse(s).unwrap()
    }

    #[test]
    fn arithmetic_is_exact() {
        assert_eq!(
            d("0.1")
                .checked_add(d("0.2"))
                .unwrap()
                .numeric_cmp(d("0.3")),
            Ordering::Equal
        );
        assert_eq!(
            d("100.00").checked_mul(d("0.0825")).unwrap().to_string(),
            "8.250000"
        );
        assert_eq!(
            d("1000000000.00")
                .checked_add(d("0.00000001"))
                .unwrap()
                .to_string(),
            "1000000000.00000001"
        );
        assert_eq!(
            d("1").checked_div(d("3")).unwrap().to_string(),
            "0.3333333333333333333333333333"
        );
        assert_eq!(d("10").checked_div(d("4")).unwrap().to_string(), "2.5");
        assert_eq!(d("-7.5").checked_rem(d("2")).unwrap().to_string(), "-1.5");
        assert_eq!(d("-0.05").to_string(), "-0.05");
        assert!(d("1").checked_div(d("0")).is_none());
        assert!(Dec::parse("1e5").is_none());
        assert!(Dec::parse("99999999999999999999999999999999999999999").is_none());
    }
}
