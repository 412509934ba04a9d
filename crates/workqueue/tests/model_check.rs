//! Model checking with shuttle (written below).
