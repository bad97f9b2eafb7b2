//! Unit tests of the master's books.
