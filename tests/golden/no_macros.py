"""Binds tunedsl but uses no macro: compiles unchanged."""
import tunedsl

x = tunedsl.cdiv(10, 3)
