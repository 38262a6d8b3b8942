"""(layer docstring)"""
