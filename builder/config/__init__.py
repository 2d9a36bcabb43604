"""What a command was asked for, resolved once: the environment's settings and a build's options, frozen.
"""
