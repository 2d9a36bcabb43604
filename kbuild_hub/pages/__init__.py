"""`kbuild hub serve`'s web pages: the kernels of the hub, each kernel's card, versions and variant
grid, which variant would load on a given machine, and the latest benchmark results a version
carries. Server-rendered (Jinja2 through Starlette's templating, autoescaped; cards through a
Markdown renderer with raw HTML off and nh3 sanitising its output); no JavaScript."""
