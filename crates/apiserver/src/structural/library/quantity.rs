//! kube's `Quantity` functions: `quantity`, `isQuantity`, `sign`, `isInteger`, `asInteger`,
//! `asApproximateFloat`, `add`, `sub`, `isLessThan`, `isGreaterThan`, `compareTo`.
//!
//! A quantity is held exactly, as an integer times a power of ten (a binary suffix is
//! multiplied out), normalized so that equal amounts are equal values (`quantity('1k') ==
//! quantity('1000')`). Amounts past what that holds (about 38 significant digits) are refused
//! as not quantities.

use std::cmp::Ordering;
use std::sync::Arc;

use cel::common::types::{INT_TYPE, STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, Value};

use super::{Outcome, error, opaque_arg, overload, string_arg};

/// The CEL type name of a quantity.
const TYPE_NAME: &str = "kubernetes.Quantity";

/// An exact amount: `units × 10^exponent`, with no trailing zero in `units` (zero has
/// exponent 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quantity {
    units: i128,
    exponent: i32,
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// apimachinery's messages for text that is not a quantity.
const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const SUFFIX_WRONG: &str = "unable to parse quantity's suffix";

impl Quantity {
    fn new(units: i128, exponent: i32) -> Option<Self> {
        let (mut units, mut exponent) = (units, exponent);
        if units == 0 {
            return Some(Self {
                units: 0,
                exponent: 0,
            });
        }
        while units % 10 == 0 {
            units /= 10;
            exponent = exponent.checked_add(1)?;
        }
        Some(Self { units, exponent })
    }

    /// Reads `text` as apimachinery's `ParseQuantity` does.
    pub fn parse(text: &str) -> Result<Self, &'static str> {
        let bytes = text.as_bytes();
        let mut at = 0;
        let negative = match bytes.first() {
            Some(b'-') => {
                at = 1;
                true
            }
            Some(b'+') => {
                at = 1;
                false
            }
            _ => false,
        };
        let (mut units, mut exponent, mut digits, mut fraction) = (0i128, 0i32, 0usize, false);
        while let Some(&byte) = bytes.get(at) {
            match byte {
                b'0'..=b'9' => {
                    units = units
                        .checked_mul(10)
                        .and_then(|units| units.checked_add(i128::from(byte - b'0')))
                        .ok_or(FORMAT_WRONG)?;
                    if fraction {
                        exponent -= 1;
                    }
                    digits += 1;
                }
                b'.' if !fraction => fraction = true,
                _ => break,
            }
            at += 1;
        }
        if digits == 0 {
            return Err(FORMAT_WRONG);
        }
        let suffix = &text[at..];
        let (ten, two) = match suffix {
            "" => (0, 0),
            "n" => (-9, 0),
            "u" => (-6, 0),
            "m" => (-3, 0),
            "k" => (3, 0),
            "M" => (6, 0),
            "G" => (9, 0),
            "T" => (12, 0),
            "P" => (15, 0),
            "E" => (18, 0),
            "Ki" => (0, 10),
            "Mi" => (0, 20),
            "Gi" => (0, 30),
            "Ti" => (0, 40),
            "Pi" => (0, 50),
            "Ei" => (0, 60),
            _ => match suffix.strip_prefix(['e', 'E']) {
                Some(power) if !power.is_empty() => {
                    (power.parse::<i32>().map_err(|_| SUFFIX_WRONG)?, 0)
                }
                _ => return Err(SUFFIX_WRONG),
            },
        };
        let units = units.checked_mul(1i128 << two).ok_or(FORMAT_WRONG)?;
        let units = if negative { -units } else { units };
        let exponent = exponent.checked_add(ten).ok_or(FORMAT_WRONG)?;
        Self::new(units, exponent).ok_or(FORMAT_WRONG)
    }

    /// Both amounts over one exponent, if that holds them.
    fn aligned(self, other: Self) -> Option<(i128, i128, i32)> {
        let exponent = self.exponent.min(other.exponent);
        let scale = |q: Self| {
            let shift = u32::try_from(q.exponent.checked_sub(exponent)?).ok()?;
            q.units.checked_mul(10i128.checked_pow(shift)?)
        };
        Some((scale(self)?, scale(other)?, exponent))
    }

    fn approximate(self) -> f64 {
        self.units as f64 * 10f64.powi(self.exponent)
    }

    fn compare(self, other: Self) -> Ordering {
        match self.aligned(other) {
            Some((a, b, _)) => a.cmp(&b),
            None => self.approximate().total_cmp(&other.approximate()),
        }
    }

    fn as_integer(self) -> Option<i64> {
        let units = if self.exponent >= 0 {
            self.units
                .checked_mul(10i128.checked_pow(u32::try_from(self.exponent).ok()?)?)?
        } else if self.units == 0 {
            0
        } else {
            return None;
        };
        i64::try_from(units).ok()
    }

    fn plus(self, other: Self) -> Option<Self> {
        let (a, b, exponent) = self.aligned(other)?;
        Self::new(a.checked_add(b)?, exponent)
    }

    fn negated(self) -> Option<Self> {
        Some(Self {
            units: self.units.checked_neg()?,
            exponent: self.exponent,
        })
    }
}

fn value(quantity: Quantity) -> Value {
    Value::Opaque(Arc::new(quantity))
}

/// The second argument as a quantity: a quantity, or an `int`.
fn operand(name: &str, args: &[Value]) -> Result<Quantity, cel::ExecutionError> {
    match args.get(1) {
        Some(Value::Int(int)) => {
            Quantity::new(i128::from(*int), 0).ok_or_else(|| error(name, "overflow"))
        }
        _ => opaque_arg::<Quantity>(name, args, 1).copied(),
    }
}

fn arithmetic(name: &str, args: &[Value], negate: bool) -> Outcome {
    let this = *opaque_arg::<Quantity>(name, args, 0)?;
    let other = operand(name, args)?;
    let other = if negate { other.negated() } else { Some(other) };
    other
        .and_then(|other| this.plus(other))
        .map(value)
        .ok_or_else(|| error(name, "quantity overflow"))
}

pub fn register(env: &mut Env) -> Result<(), DeclarationError> {
    overload!(quantity, "quantity", |name, args| {
        Quantity::parse(string_arg(name, args, 0)?)
            .map(value)
            .map_err(|problem| error(name, problem))
    });
    overload!(is_quantity, "isQuantity", |name, args| {
        Ok(Value::Bool(
            Quantity::parse(string_arg(name, args, 0)?).is_ok(),
        ))
    });
    overload!(sign, "sign", |name, args| {
        let this = opaque_arg::<Quantity>(name, args, 0)?;
        Ok(Value::Int(this.units.signum() as i64))
    });
    overload!(is_integer, "isInteger", |name, args| {
        Ok(Value::Bool(
            opaque_arg::<Quantity>(name, args, 0)?
                .as_integer()
                .is_some(),
        ))
    });
    overload!(as_integer, "asInteger", |name, args| {
        let this = opaque_arg::<Quantity>(name, args, 0)?;
        this.as_integer()
            .map(Value::Int)
            .ok_or_else(|| error(name, "cannot convert value to integer"))
    });
    overload!(as_float, "asApproximateFloat", |name, args| {
        Ok(Value::Float(
            opaque_arg::<Quantity>(name, args, 0)?.approximate(),
        ))
    });
    overload!(add, "add", |name, args| arithmetic(name, args, false));
    overload!(sub, "sub", |name, args| arithmetic(name, args, true));
    overload!(is_less_than, "isLessThan", |name, args| {
        let this = *opaque_arg::<Quantity>(name, args, 0)?;
        Ok(Value::Bool(
            this.compare(operand(name, args)?) == Ordering::Less,
        ))
    });
    overload!(is_greater_than, "isGreaterThan", |name, args| {
        let this = *opaque_arg::<Quantity>(name, args, 0)?;
        Ok(Value::Bool(
            this.compare(operand(name, args)?) == Ordering::Greater,
        ))
    });
    overload!(compare_to, "compareTo", |name, args| {
        let this = *opaque_arg::<Quantity>(name, args, 0)?;
        Ok(Value::Int(this.compare(operand(name, args)?) as i64))
    });
    let quantity_type = || Type::new_opaque_type(TYPE_NAME);
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        quantity,
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        is_quantity,
    )?;
    env.add_overload("sign", "quantity_sign", vec![quantity_type()], sign)?;
    env.add_member_overload(
        "sign",
        "quantity_sign_member",
        quantity_type(),
        vec![],
        sign,
    )?;
    env.add_member_overload(
        "isInteger",
        "quantity_is_integer",
        quantity_type(),
        vec![],
        is_integer,
    )?;
    env.add_member_overload(
        "asInteger",
        "quantity_get_int",
        quantity_type(),
        vec![],
        as_integer,
    )?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_get_float",
        quantity_type(),
        vec![],
        as_float,
    )?;
    for (function, id, body) in [
        (
            "add",
            "quantity_add",
            add as cel::common::functions::Function,
        ),
        ("sub", "quantity_sub", sub),
        ("isLessThan", "quantity_is_less_than", is_less_than),
        ("isGreaterThan", "quantity_is_greater_than", is_greater_than),
        ("compareTo", "quantity_compare_to", compare_to),
    ] {
        env.add_member_overload(function, id, quantity_type(), vec![quantity_type()], body)?;
    }
    env.add_member_overload(
        "add",
        "quantity_add_int",
        quantity_type(),
        vec![INT_TYPE],
        add,
    )?;
    env.add_member_overload(
        "sub",
        "quantity_sub_int",
        quantity_type(),
        vec![INT_TYPE],
        sub,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{assert_true, eval};
    use super::Quantity;

    #[test]
    fn quantities_parse_as_apimachinery_reads_them() {
        for valid in [
            "1", "1.5Gi", "100m", "-2k", "+3", "1e3", "2E-2", ".5", "5.", "0",
        ] {
            assert!(Quantity::parse(valid).is_ok(), "{valid}");
        }
        for invalid in ["", "Gi", "1Gb", "1 Gi", "1..5", "1e", "abc", "1.5.5"] {
            assert!(Quantity::parse(invalid).is_err(), "{invalid}");
        }
    }

    #[test]
    fn quantity_functions_answer_as_kube_does() {
        assert_true(&[
            "quantity('1k') == quantity('1000')",
            "quantity('1Gi').isGreaterThan(quantity('1G'))",
            "quantity('500m').isLessThan(quantity('1'))",
            "quantity('1Ki').compareTo(quantity('1024')) == 0",
            "quantity('2').add(quantity('500m')) == quantity('2.5')",
            "quantity('2').sub(3) == quantity('-1')",
            "quantity('2').add(1).asInteger() == 3",
            "!quantity('1500m').isInteger()",
            "quantity('1500m').asApproximateFloat() == 1.5",
            "quantity('-5').sign() == -1",
            "isQuantity('1Mi')",
            "!isQuantity('1MB')",
        ]);
        assert!(
            eval("quantity('1.5').asInteger()")
                .unwrap_err()
                .contains("cannot convert value to integer")
        );
        assert!(
            eval("quantity('x')")
                .unwrap_err()
                .contains("quantities must match")
        );
    }
}
