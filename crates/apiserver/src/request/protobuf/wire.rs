//! Protocol Buffers' wire format: varints, tags, length-delimited fields and fixed 64-bit values,
//! read without panicking on any input and written into a buffer.

/// A malformed message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message ends in the middle of a field.
    #[error("unexpected end of the message")]
    Truncated,
    /// A varint of more than ten bytes.
    #[error("a varint is too long")]
    VarintTooLong,
    /// A wire type this format does not have (or a group, which Kubernetes never uses).
    #[error("unsupported wire type {0}")]
    WireType(u8),
    /// A length past the end of the message.
    #[error("a length runs past the end of the message")]
    Length,
}

/// How a field's value is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1.
    Fixed64(u64),
    /// Wire type 2: bytes, a string, a message, or packed numbers.
    Bytes(&'a [u8]),
    /// Wire type 5.
    Fixed32(u32),
}

/// Reads the fields of one message in order.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// The next field's number and value; `None` at the end.
    pub fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, WireError> {
        if self.bytes.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3).unwrap_or(u32::MAX);
        let wire_type = (key & 7) as u8;
        let value = match wire_type {
            0 => Value::Varint(self.varint()?),
            1 => Value::Fixed64(u64::from_le_bytes(self.take_array()?)),
            2 => {
                let length = usize::try_from(self.varint()?).map_err(|_| WireError::Length)?;
                if length > self.bytes.len() {
                    return Err(WireError::Length);
                }
                let (value, rest) = self.bytes.split_at(length);
                self.bytes = rest;
                Value::Bytes(value)
            }
            5 => Value::Fixed32(u32::from_le_bytes(self.take_array()?)),
            other => return Err(WireError::WireType(other)),
        };
        Ok(Some((number, value)))
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let (head, rest) = self
            .bytes
            .split_first_chunk::<N>()
            .ok_or(WireError::Truncated)?;
        self.bytes = rest;
        Ok(*head)
    }

    /// A varint.
    pub fn varint(&mut self) -> Result<u64, WireError> {
        let mut value = 0u64;
        for index in 0..10 {
            let (&byte, rest) = self.bytes.split_first().ok_or(WireError::Truncated)?;
            self.bytes = rest;
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(WireError::VarintTooLong)
    }
}

/// Appends a varint.
pub fn put_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Appends a field's key.
pub fn put_key(number: u32, wire_type: u8, out: &mut Vec<u8>) {
    put_varint((u64::from(number) << 3) | u64::from(wire_type), out);
}

/// Appends a length-delimited field.
pub fn put_bytes(number: u32, bytes: &[u8], out: &mut Vec<u8>) {
    put_key(number, 2, out);
    put_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

/// Appends a varint field.
pub fn put_varint_field(number: u32, value: u64, out: &mut Vec<u8>) {
    put_key(number, 0, out);
    put_varint(value, out);
}

/// Appends a fixed 64-bit field.
pub fn put_fixed64_field(number: u32, value: u64, out: &mut Vec<u8>) {
    put_key(number, 1, out);
    out.extend_from_slice(&value.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut out = Vec::new();
        put_varint_field(1, 300, &mut out);
        put_bytes(2, b"hi", &mut out);
        put_fixed64_field(3, 7, &mut out);
        put_varint_field(4, (-2i64) as u64, &mut out);
        let mut reader = Reader::new(&out);
        assert_eq!(reader.next_field().unwrap(), Some((1, Value::Varint(300))));
        assert_eq!(reader.next_field().unwrap(), Some((2, Value::Bytes(b"hi"))));
        assert_eq!(reader.next_field().unwrap(), Some((3, Value::Fixed64(7))));
        assert_eq!(
            reader.next_field().unwrap(),
            Some((4, Value::Varint((-2i64) as u64)))
        );
        assert_eq!(reader.next_field().unwrap(), None);
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for bad in [
            &[0x0a, 0x05, b'a'][..],
            &[0x08][..],
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            ][..],
            &[0x0b][..],
            &[0x09, 1, 2][..],
        ] {
            let mut reader = Reader::new(bad);
            assert!(reader.next_field().is_err(), "{bad:?}");
        }
    }
}
