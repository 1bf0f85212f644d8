"""The HTTP face of the gateway: the FastAPI app, its routes, wire schemas, responses, the
middleware, what each injected fault does to a call, and the uvicorn server."""
