//! Kubernetes' own cases: `TestQuantityParse`, `TestParseQuantityString`, `TestQuantityParseEmit`
//! and `TestScaledValue` of k8s.io/apimachinery/pkg/api/resource/quantity_test.go
//! (kubernetes/kubernetes, staging/src/k8s.io/apimachinery/pkg/api/resource/quantity_test.go).

use super::*;
use proptest::prelude::*;

/// apimachinery's `decQuantity(mantissa, exponent, _)`: mantissa × 10^exponent, in nano-units.
const fn dec(mantissa: i128, exponent: u32) -> i128 {
    mantissa * 10i128.pow(exponent + 9)
}

/// The same with a negative exponent (at least -9: nothing finer is kept).
const fn dec_fine(mantissa: i128, exponent: u32) -> i128 {
    mantissa * 10i128.pow(9 - exponent)
}

fn nanos(text: &str) -> Result<i128, QuantityError> {
    Quantity::parse(text).map(|q| q.nanos)
}

/// 2^63 - 1 units: apimachinery's `maxAllowed`, where a binary-suffixed quantity stops.
const MAX_ALLOWED: i128 = dec(9_223_372_036_854_775_807, 0);

/// `TestQuantityParse`'s table: each text and the quantity it reads as.
const PARSED: &[(&str, i128)] = &[
    ("0", 0),
    ("0n", 0),
    ("0u", 0),
    ("0m", 0),
    ("0Ki", 0),
    ("0k", 0),
    ("0Mi", 0),
    ("0M", 0),
    ("0Gi", 0),
    ("0G", 0),
    ("0Ti", 0),
    ("0T", 0),
    // Quantity less numbers are allowed
    ("1", dec(1, 0)),
    // Binary suffixes
    ("1Ki", dec(1024, 0)),
    ("8Ki", dec(8 * 1024, 0)),
    ("7Mi", dec(7 * 1024 * 1024, 0)),
    ("6Gi", dec(6 * 1024 * 1024 * 1024, 0)),
    ("5Ti", dec(5 * 1024 * 1024 * 1024 * 1024, 0)),
    ("4Pi", dec(4 * 1024 * 1024 * 1024 * 1024 * 1024, 0)),
    ("3Ei", dec(3 * 1024 * 1024 * 1024 * 1024 * 1024 * 1024, 0)),
    ("10Ti", dec(10 * 1024 * 1024 * 1024 * 1024, 0)),
    ("100Ti", dec(100 * 1024 * 1024 * 1024 * 1024, 0)),
    // Decimal suffixes
    ("5n", dec_fine(5, 9)),
    ("4u", dec_fine(4, 6)),
    ("3m", dec_fine(3, 3)),
    ("9", dec(9, 0)),
    ("8k", dec(8, 3)),
    ("50k", dec(5, 4)),
    ("7M", dec(7, 6)),
    ("6G", dec(6, 9)),
    ("5T", dec(5, 12)),
    ("40T", dec(4, 13)),
    ("300T", dec(3, 14)),
    ("2P", dec(2, 15)),
    ("1E", dec(1, 18)),
    // Decimal exponents
    ("1E-3", dec_fine(1, 3)),
    ("1e3", dec(1, 3)),
    ("1E6", dec(1, 6)),
    ("1e9", dec(1, 9)),
    ("1E12", dec(1, 12)),
    ("1e15", dec(1, 15)),
    ("1E18", dec(1, 18)),
    // Nonstandard but still parsable
    ("1e14", dec(1, 14)),
    ("1e13", dec(1, 13)),
    ("100.035k", dec(100035, 0)),
    // Things that look like floating point
    ("0.001", dec_fine(1, 3)),
    ("0.0005k", dec_fine(5, 1)),
    ("0.005", dec_fine(5, 3)),
    ("0.05", dec_fine(5, 2)),
    ("0.5", dec_fine(5, 1)),
    ("0.00050k", dec_fine(5, 1)),
    ("0.00500", dec_fine(5, 3)),
    ("0.05000", dec_fine(5, 2)),
    ("0.50000", dec_fine(5, 1)),
    ("0.5e0", dec_fine(5, 1)),
    ("0.5e-1", dec_fine(5, 2)),
    ("0.5e-2", dec_fine(5, 3)),
    ("10.035M", dec(10035, 3)),
    ("1.2e3", dec(12, 2)),
    ("1.3E+6", dec(13, 5)),
    ("1.40e9", dec(14, 8)),
    ("1.53E12", dec(153, 10)),
    ("1.6e15", dec(16, 14)),
    ("1.7E18", dec(17, 17)),
    ("9.01", dec_fine(901, 2)),
    ("8.1k", dec(81, 2)),
    ("7.123456M", dec(7123456, 0)),
    ("6.987654321G", dec(6987654321, 0)),
    ("5.444T", dec(5444, 9)),
    ("40.1T", dec(401, 11)),
    ("300.2T", dec(3002, 11)),
    ("2.5P", dec(25, 14)),
    ("1.01E", dec(101, 16)),
    // Things that saturate/round
    ("3.001n", dec_fine(4, 9)),
    ("1.1E-9", dec_fine(2, 9)),
    ("0.0000000001", dec_fine(1, 9)),
    ("0.0000000005", dec_fine(1, 9)),
    ("0.00000000050", dec_fine(1, 9)),
    ("0.5e-9", dec_fine(1, 9)),
    ("0.9n", dec_fine(1, 9)),
    ("0.00000012345", dec_fine(124, 9)),
    ("0.00000012354", dec_fine(124, 9)),
    ("9Ei", MAX_ALLOWED),
    ("9223372036854775807Ki", MAX_ALLOWED),
    ("12E", dec(12, 18)),
    // We'll accept fractional binary stuff, too.
    ("100.035Ki", dec_fine(10243584, 2)),
    ("0.5Mi", dec(512 * 1024, 0)),
    ("0.05Gi", dec_fine(536870912, 1)),
    ("0.025Ti", dec_fine(274877906944, 1)),
    // Things written by trolls
    ("0.000000000001Ki", dec_fine(2, 9)),
    (".001", dec_fine(1, 3)),
    (".0001k", dec_fine(100, 3)),
    ("1.", dec(1, 0)),
    ("1.G", dec(1, 9)),
];

#[test]
fn quantity_parse_table_of_apimachinery() {
    for &(text, expected) in PARSED {
        assert_eq!(nanos(text), Ok(expected), "{text}");
        // The test runs every row again signed, as apimachinery's does.
        assert_eq!(nanos(&format!("-{text}")), Ok(-expected), "-{text}");
        assert_eq!(nanos(&format!("+{text}")), Ok(expected), "+{text}");
    }
}

#[test]
fn what_the_api_server_refuses_is_named() {
    // TestQuantityParse's invalid list, its empty string, and TestQuantityParseNonNumericPanic.
    let invalid = [
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        " 1",
        "1 ",
        "",
        "Non-Numeric",
    ];
    for text in invalid {
        assert_eq!(nanos(text), Err(QuantityError::Malformed(text.to_owned())), "{text:?}");
    }
    assert_eq!(
        QuantityError::Malformed("500x".into()).to_string(),
        "\"500x\" is not a quantity: a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki to Ei) or exponent (e3, E-3)"
    );
}

/// TestParseQuantityString reads `.` and `-.` as numbers without digits, which quantity.go's
/// int64 path reads as 0 and its decimal path (finer than nano, `Pi`, `Ei`) refuses.
#[test]
fn a_number_without_digits_is_zero_where_apimachinery_reads_it_so() {
    for text in [".", "-.", "+", "-", "m", "Ki", "Ti", ".e-9"] {
        assert_eq!(nanos(text), Ok(0), "{text}");
    }
    for text in [".e-10", "Pi", "-Ei", "e"] {
        assert_eq!(nanos(text), Err(QuantityError::Malformed(text.to_owned())), "{text}");
    }
}

/// Past what the room can count: a decimal quantity is refused (apimachinery keeps it whole, but
/// kube-scheduler's int64 counts overflowed long before); a binary one stops at 2^63 - 1.
#[test]
fn a_quantity_past_counting_is_refused_and_a_binary_one_capped() {
    assert_eq!(nanos("1e29"), Ok(dec(1, 29)));
    assert_eq!(nanos("1e30"), Err(QuantityError::TooLarge("1e30".into())));
    assert_eq!(nanos("1e999999"), Err(QuantityError::TooLarge("1e999999".into())));
    assert_eq!(nanos("0e999999"), Ok(0));
    assert_eq!(nanos("1e-999999"), Ok(1));
    assert_eq!(nanos(&format!("{}Ei", "9".repeat(60))), Ok(MAX_ALLOWED));
    // suffix.go narrows a 64-bit exponent to 32 bits: 2^32 is 0.
    assert_eq!(nanos("1e4294967296"), Ok(dec(1, 0)));
}

/// TestScaledValue (1 of each scale to milli and to whole units), TestQuantityRoundUp's 9.01
/// (up, away from zero) and the CPU: `Value` and `MilliValue` round up.
#[test]
fn value_and_milli_value_round_up() {
    let table = [
        ("1n", 1, 1),
        ("1u", 1, 1),
        ("1m", 1, 1),
        ("1", 1000, 1),
        ("9.01", 9010, 10),
        ("-9.01", -9010, -10),
        ("86000001u", 86001, 87),
        ("86001m", 86001, 87),
        ("1.5n", 1, 1),
        ("0", 0, 0),
    ];
    for (text, milli, value) in table {
        let quantity = Quantity::parse(text).expect(text);
        assert_eq!((quantity.milli_value(), quantity.value()), (milli, value), "{text}");
    }
}

/// An amount of nano-units written as `n`, `u`, `m`, plain and `e-9`.
fn written_five_ways(nanos: u64) -> [String; 5] {
    let split = |unit: u64, width: usize| format!("{}.{:0width$}", nanos / unit, nanos % unit);
    [
        format!("{nanos}n"),
        format!("{}u", split(1_000, 3)),
        format!("{}m", split(1_000_000, 6)),
        split(1_000_000_000, 9),
        format!("{nanos}e-9"),
    ]
}

proptest! {
    #[test]
    fn the_same_amount_reads_the_same_in_every_suffix(nanos in 0u64..=u64::MAX) {
        for text in written_five_ways(nanos) {
            let quantity = Quantity::parse(&text).expect("a quantity");
            prop_assert_eq!(quantity.nanos, i128::from(nanos), "{}", text);
            prop_assert_eq!(quantity.milli_value(), i128::from(nanos.div_ceil(1_000_000)), "{}", text);
            prop_assert_eq!(quantity.value(), i128::from(nanos.div_ceil(1_000_000_000)), "{}", text);
        }
    }

    #[test]
    /// ... up to apimachinery's cap of 2^63 - 1 units.
    fn a_binary_suffix_is_its_power_of_two(amount in 0u64..(1 << 40), power in 0usize..4) {
        let suffix = ["Ki", "Mi", "Gi", "Ti"][power];
        let units = u128::from(amount) << (10 * (power + 1));
        let plain = units.min(i64::MAX as u128).to_string();
        prop_assert_eq!(Quantity::parse(&format!("{amount}{suffix}")), Quantity::parse(&plain));
    }

    /// Never a panic: on any text, on text made of a quantity's characters, and on long numbers
    /// with any suffix or exponent (past what u128 holds).
    #[test]
    fn reading_never_panics(
        any in any::<String>(),
        near in "[+-]?[0-9.]{0,40}[eEinumkKMGTP]{0,3}[+-]?[0-9]{0,12}",
        long in "-?[0-9]{30,60}(\\.[0-9]{0,60})?([numkMGTPE]|[KMGTPE]i|[eE][+-]?[0-9]{1,11})?",
    ) {
        for text in [any, near, long] {
            if let Ok(quantity) = Quantity::parse(&text) {
                let _ = (quantity.milli_value(), quantity.value());
            }
        }
    }
}
