"""`kbuild test`: a kernel's own tests run against each built variant.
"""
