"""`kbuild publish`: what a build folder may upload (integrity), the repo card, and the commit to a version branch.
"""
