//! Kubernetes resource quantities (`500m`, `30Gi`, `1e3`, `86000001u`), read as apimachinery's
//! `resource.ParseQuantity` reads them (k8s.io/apimachinery/pkg/api/resource: quantity.go and
//! suffix.go), exactly and in integers, as a float cannot: `86000001u` is 86.000001 cores, which
//! kube-scheduler counts as 86001m.

/// A quantity in nano-units. apimachinery keeps a quantity to the nano-unit, a finer value rounded
/// away from zero (`0.9n` is `1n`), and a binary-suffixed one at most 2^63 - 1 (`9Ei` is 2^63 - 1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity {
    nanos: i128,
}

/// Why a quantity cannot be read: the API server refuses it, or it is past what can be counted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "{0:?} is not a quantity: a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki to Ei) or exponent (e3, E-3)"
    )]
    Malformed(String),
    #[error("{0:?} is too large to count")]
    TooLarge(String),
    #[error("{0:?} is negative: Kubernetes keeps requests and allocatable at 0 or more")]
    Negative(String),
}

const NANOS_PER_UNIT: i128 = 1_000_000_000;
const NANOS_PER_MILLI: i128 = 1_000_000;
/// apimachinery's cap of a binary-suffixed quantity, 2^63 - 1 units, in nano-units.
const BINARY_CAP: u128 = (i64::MAX as u128) * NANOS_PER_UNIT as u128;

/// What a suffix multiplies the number by: a power of ten or of two.
enum Suffix {
    Ten(i32),
    Two(u32),
}

impl Quantity {
    /// `text` as `ParseQuantity` reads it: a sign, digits with an optional point, then a suffix
    /// or an exponent; the error names `text`.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let malformed = || QuantityError::Malformed(text.to_owned());
        let (negative, unsigned) = match text.as_bytes() {
            [] => return Err(malformed()),
            [b'-', rest @ ..] => (true, rest),
            [b'+', rest @ ..] => (false, rest),
            all => (false, all),
        };
        let (integer, rest) = unsigned.split_at(digits(unsigned));
        let (fraction, suffix) = match rest {
            [b'.', after @ ..] => after.split_at(digits(after)),
            _ => (&[][..], rest),
        };
        let suffix = Suffix::of(suffix).ok_or_else(malformed)?;
        let mut number: Vec<u8> = integer.iter().chain(fraction).map(|d| d - b'0').collect();
        if number.is_empty() {
            // No digit at all (`+`, `.`, `m`): apimachinery's int64 path reads it as 0, its
            // decimal path (exponents below -9, `Pi`, `Ei`) refuses it.
            return match suffix {
                Suffix::Ten(exponent) if exponent < -9 => Err(malformed()),
                Suffix::Two(power) if power >= 50 => Err(malformed()),
                _ => Ok(Self::default()),
            };
        }
        let fraction_digits = i64::try_from(fraction.len()).unwrap_or(i64::MAX);
        let magnitude = match suffix {
            Suffix::Ten(exponent) => {
                let shift = i64::from(exponent).saturating_add(9).saturating_sub(fraction_digits);
                nano_units(&number, shift)
                    .and_then(|nanos| i128::try_from(nanos).ok())
                    .ok_or_else(|| QuantityError::TooLarge(text.to_owned()))?
            }
            Suffix::Two(power) => {
                multiply(&mut number, 1 << power);
                let nanos = nano_units(&number, 9i64.saturating_sub(fraction_digits));
                nanos.map_or(BINARY_CAP, |n| n.min(BINARY_CAP)) as i128
            }
        };
        let nanos = if negative { -magnitude } else { magnitude };
        Ok(Self { nanos })
    }

    /// `MilliValue()`: in thousandths, rounded away from zero (kube-scheduler counts CPU so).
    pub fn milli_value(self) -> i128 {
        away_from_zero(self.nanos, NANOS_PER_MILLI)
    }

    /// `Value()`: in whole units, rounded away from zero (kube-scheduler counts memory, pods and
    /// extended resources such as GPUs so).
    pub fn value(self) -> i128 {
        away_from_zero(self.nanos, NANOS_PER_UNIT)
    }

    /// An amount a pod requests or a node offers, which the API server's validation keeps at 0
    /// or more (`ValidateResourceQuantityValue`, k8s.io/kubernetes/pkg/apis/core/validation).
    pub fn amount(text: &str) -> Result<Self, QuantityError> {
        match Self::parse(text)? {
            Self { nanos } if nanos < 0 => Err(QuantityError::Negative(text.to_owned())),
            quantity => Ok(quantity),
        }
    }

    /// The sum, held at the largest amount rather than overflowing.
    pub fn saturating_add(self, other: Self) -> Self {
        let nanos = self.nanos.saturating_add(other.nanos);
        Self { nanos }
    }
}

impl Suffix {
    /// A suffix as apimachinery's `suffixer` interprets it: decimal SI, binary SI, or `e`/`E` and
    /// a signed 64-bit exponent, which it then narrows to 32 bits (so `1e4294967296` is 1).
    fn of(suffix: &[u8]) -> Option<Self> {
        Some(match suffix {
            b"n" => Self::Ten(-9),
            b"u" => Self::Ten(-6),
            b"m" => Self::Ten(-3),
            b"" => Self::Ten(0),
            b"k" => Self::Ten(3),
            b"M" => Self::Ten(6),
            b"G" => Self::Ten(9),
            b"T" => Self::Ten(12),
            b"P" => Self::Ten(15),
            b"E" => Self::Ten(18),
            b"Ki" => Self::Two(10),
            b"Mi" => Self::Two(20),
            b"Gi" => Self::Two(30),
            b"Ti" => Self::Two(40),
            b"Pi" => Self::Two(50),
            b"Ei" => Self::Two(60),
            [b'e' | b'E', exponent @ ..] => {
                let exponent: i64 = std::str::from_utf8(exponent).ok()?.parse().ok()?;
                Self::Ten(exponent as i32)
            }
            _ => return None,
        })
    }
}

/// How many ASCII digits `bytes` starts with.
fn digits(bytes: &[u8]) -> usize {
    bytes.iter().take_while(|b| b.is_ascii_digit()).count()
}

/// The decimal `number` (its digits, most significant first) times 10^`shift`, rounded up to a
/// whole number; None past u128.
fn nano_units(number: &[u8], shift: i64) -> Option<u128> {
    let dropped = usize::try_from(shift.min(0).unsigned_abs()).unwrap_or(usize::MAX);
    let (kept, dropped) = number.split_at(number.len().saturating_sub(dropped));
    let mut whole = kept
        .iter()
        .try_fold(0u128, |n, &d| n.checked_mul(10)?.checked_add(u128::from(d)))?;
    if dropped.iter().any(|&d| d != 0) {
        whole = whole.checked_add(1)?;
    }
    if shift > 0 && whole != 0 {
        whole = whole.checked_mul(10u128.checked_pow(u32::try_from(shift).ok()?)?)?;
    }
    Some(whole)
}

/// Multiplies the decimal `number` in place by `factor` (at most 2^60).
fn multiply(number: &mut Vec<u8>, factor: u128) {
    let mut carry = 0;
    for digit in number.iter_mut().rev() {
        let product = u128::from(*digit) * factor + carry;
        *digit = (product % 10) as u8;
        carry = product / 10;
    }
    while carry > 0 {
        number.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

/// The remainder has the sign of `nanos`, or is 0: one more unit away from zero where there is one.
fn away_from_zero(nanos: i128, unit: i128) -> i128 {
    nanos / unit + (nanos % unit).signum()
}

#[cfg(test)]
mod tests;
