"""The hub's HTTP service (FastAPI): authenticated JSON API for stations and the leaderboard.

Stations, runners and viewers authenticate with keys; a station key reads nothing that names a
policy.  Endpoints and blinding: docs/hub_server.md and docs/hub.md.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time,
# and they name dependencies defined inside create_app.

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import threading
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Header, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from .designs import FAMILIES
from .errors import HubError
from .evaluation import Evaluation
from .leaderboard import fitted_order
from .rankings import MODELS
from .relay import RELAY_PATH, relay
from .schedule import Schedule
from .store import HubStore, JournalEntry

__all__ = ["COOKIE", "HubSettings", "create_app"]

#: The sign-in cookie of the leaderboard page (HttpOnly: no script reads it).
COOKIE = "evalstop_hub_key"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


@dataclasses.dataclass(frozen=True)
class HubSettings:
    """How the hub assigns and judges work."""

    tasks: tuple[str, ...] = ("default",)
    lease_seconds: float = 60.0
    schedule: str = "uncertain"
    method: str = "mixture"
    alpha: float = 0.05
    ranker: str = "bt"
    models: tuple[str, ...] = MODELS
    budget: int = 0
    public_leaderboard: bool = False
    #: Relay the policy protocol (:mod:`.relay`): runners get relay locators, never an address.
    relay: bool = False
    max_body: int = 64 * 1024
    seed: int | None = None
    family: str = FAMILIES[0]

    def evaluation(self) -> Evaluation:
        """What of these settings is the hub's journaled evaluation (:mod:`.evaluation`)."""
        return Evaluation(method=self.method, alpha=self.alpha, ranker=self.ranker, models=tuple(self.models),
                          budget=self.budget, schedule=self.schedule, tasks=tuple(self.tasks), family=self.family)


class ResultUpload(BaseModel):
    """A station's result for one lease."""

    model_config = ConfigDict(extra="forbid")
    upload_id: str = Field(min_length=8, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    score_a: float = Field(ge=0.0, le=1.0)
    score_b: float = Field(ge=0.0, le=1.0)


class TicketRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ticket: str = Field(min_length=8, max_length=128)


#: Refused bodies up to this size are read and dropped before the 413 answer (see BodyLimit).
DRAIN_LIMIT = 16 * 1024 * 1024


class BodyLimit:
    """ASGI middleware: refuse a body over ``limit`` bytes (declared or streamed) with 413."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            if declared.isdigit() and int(declared) <= DRAIN_LIMIT:
                # read and drop the body, so that the client, still sending, gets the answer
                # instead of a reset connection; larger bodies are cut off unread
                while (await receive()).get("more_body", False):
                    pass
            await self._refuse(send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HubError(f"request body over {self.limit} bytes", 413)
            return message

        await self.app(scope, limited, send)

    async def _refuse(self, send: Callable[[Message], Awaitable[None]]) -> None:
        body = json.dumps({"error": f"request body over {self.limit} bytes; nothing written"}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


class _Board:
    """The live leaderboard, fed the journal entries added since it was last read.

    Leases and board reads never wait for each other's work: the ``uncertain`` schedule takes
    :meth:`~.leaderboard.Leaderboard.focus` under the feed lock (new entries are fed in O(1) per
    result; a due refit of the order is fitted in a thread, outside it), a reader takes :meth:`~.leaderboard.Leaderboard.capture` under it (O(policies)) and
    computes the snapshot after releasing it, under a lock of the readers' own (one snapshot per
    new result; readers meanwhile wait for it, not leases)."""

    def __init__(self, store: HubStore, settings: HubSettings) -> None:
        self._store = store
        self._lock = threading.Lock()  # the feed: leases and readers, short
        self._reading = threading.Lock()  # the readers' snapshot, long
        self._ordering = threading.Lock()  # a refit of the order, in a thread of its own
        self._board = settings.evaluation().leaderboard(store.policies())
        self._board.fit_apart = self._fit_apart
        self._workers: Any = None  # a multiprocessing pool of one, started by the first large fit
        self._seq = 0
        self._snapshot: dict[str, Any] | None = None
        self._snapshot_key = (-1, -1)

    def _catch_up(self) -> None:
        new: list[JournalEntry] = self._store.journal(after=self._seq)
        if new:
            self._seq = new[-1].seq
            self._board.add([e.to_dict() for e in new])

    def catch_up(self) -> None:
        """Feed the journal written so far and fit its order (a hub starting on a database with results)."""
        with self._lock:
            self._catch_up()
            self._board.order()

    def get(self) -> dict[str, Any]:
        with self._reading:
            with self._lock:
                self._catch_up()
                key = (len(self._board.trials), len(self._board.policies))
                render = self._board.capture() if self._snapshot is None or self._snapshot_key != key else None
            if render is not None:
                self._snapshot, self._snapshot_key = render(), key
            assert self._snapshot is not None
            return self._snapshot

    def progress(self) -> dict[str, Any]:
        """Whether the ranking is settled or the budget spent (:meth:`~.leaderboard.Leaderboard.progress`)."""
        with self._lock:
            self._catch_up()
            return self._board.progress()

    def schedule(self, name: str) -> Schedule:
        """The schedule of the next lease (``uncertain`` with the board's current focus). A refit of
        the order that is due (O(results), :meth:`~.leaderboard.Leaderboard.order_due`) runs in a
        thread of its own; leases meanwhile take the order fitted before."""
        if name != "uncertain":
            return Schedule(name)
        with self._lock:
            self._catch_up()
            due = self._board.order_due()
            focus = self._board.focus(refit=False)
        if due is not None and self._ordering.acquire(blocking=False):
            threading.Thread(target=self._refit, args=due, name="hub-board-order", daemon=True).start()
        return Schedule(name, focus)

    def _fit_apart(self, fit: Callable[..., Any], *args: Any) -> Any:
        """Run ``fit(*args)`` in the board's worker process (spawned, nice 10): a fit of a large
        board holds neither this process's interpreter lock nor, under load, the CPU its leases need."""
        if self._workers is None:
            import multiprocessing

            self._workers = multiprocessing.get_context("spawn").Pool(1, initializer=os.nice, initargs=(10,))
        return self._workers.apply(fit, args)

    def close(self) -> None:
        """Stop the worker process (a fit in progress is abandoned)."""
        if self._workers is not None:
            self._workers.terminate()

    def _refit(self, m: int, data: Any) -> None:
        try:
            order = fitted_order(data)
            with self._lock:
                self._board.install_order(m, order)
        finally:
            self._ordering.release()


async def _sweep_leases(store: HubStore, every: float) -> None:
    """Requeue leases past their deadline every ``every`` seconds, so silence is noticed even
    when no station asks for work (a lease is also checked whenever work is handed out)."""
    while True:
        await asyncio.sleep(every)
        await asyncio.to_thread(store.requeue_expired)


def create_app(store: HubStore, settings: HubSettings = HubSettings()) -> FastAPI:
    """The hub's ASGI application over ``store``. The settings' evaluation is journaled on the
    first start; a later start with another is refused (:class:`HubError`, :mod:`.evaluation`)."""
    proposed = settings.evaluation()
    proposed.settled(Evaluation.from_body(store.settle_evaluation(proposed.body())))
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        sweeper = asyncio.create_task(_sweep_leases(store, max(0.2, settings.lease_seconds / 4)))
        try:
            yield
        finally:
            sweeper.cancel()
            board.close()

    app = FastAPI(title="evalstop hub", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    rng = random.Random(settings.seed)
    board = _Board(store, settings)
    board.catch_up()  # the results so far, before the first lease

    @app.exception_handler(HubError)
    async def _hub_error(request: Request, err: HubError) -> JSONResponse:
        return JSONResponse({"error": f"{err}"}, status_code=err.status)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, err: RequestValidationError) -> JSONResponse:
        reasons = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors())
        return JSONResponse({"error": f"malformed request, nothing written: {reasons}"}, status_code=400)

    def caller(authorization: Annotated[str | None, Header()] = None) -> tuple[str, str]:
        token = authorization.removeprefix("Bearer ").strip() if authorization else None
        return store.authenticate(token)

    def station(who: Annotated[tuple[str, str], Depends(caller)]) -> str:
        if who[1] != "station":
            raise HubError(f"{who[0]!r} is a {who[1]} key; only stations take work", 403)
        return who[0]

    def viewer(who: tuple[str, str], what: str) -> None:
        if who[1] != "viewer":
            raise HubError(f"{who[0]!r} is a {who[1]} key; {what} names the policies, so only viewer keys may "
                           "read it (a station must stay blind to its arms)", 403)

    def reader(request: Request) -> None:
        if not settings.public_leaderboard:
            viewer(caller(request.headers.get("authorization")), "the leaderboard")

    @app.post("/v1/work")
    def work(station_id: Annotated[str, Depends(station)]) -> dict[str, Any]:
        assignment, ticket = store.lease(station_id, settings.lease_seconds, settings.tasks,
                                         board.schedule(settings.schedule), rng)
        return {"assignment_id": assignment.assignment_id, "task": assignment.task, "arms": ["A", "B"],
                "lease_deadline": assignment.lease_deadline, "lease_seconds": settings.lease_seconds,
                "runner_ticket": ticket}

    @app.post("/v1/tickets/resolve")
    def resolve(body: TicketRequest, request: Request, station_id: Annotated[str, Depends(station)]) -> dict[str, str]:
        relay_url = None
        if settings.relay:  # the relay as the station reached the hub (behind a proxy: its public name)
            relay_url = f"{'wss' if request.url.scheme == 'https' else 'ws'}://{request.url.netloc}{RELAY_PATH}"
        return store.resolve_ticket(station_id, body.ticket, relay_url)

    @app.websocket(RELAY_PATH)
    async def relayed(websocket: WebSocket) -> None:
        if not settings.relay:
            await websocket.close(code=1008)
            return
        await relay(websocket, store.relay_target)

    @app.post("/v1/assignments/{assignment_id}/renew")
    def renew(assignment_id: str, station_id: Annotated[str, Depends(station)]) -> dict[str, float]:
        return {"lease_deadline": store.renew(station_id, assignment_id, settings.lease_seconds)}

    @app.post("/v1/assignments/{assignment_id}/result")
    def result(assignment_id: str, body: ResultUpload, station_id: Annotated[str, Depends(station)]) -> dict[str, str]:
        status = store.submit(station_id, assignment_id, body.upload_id, body.score_a, body.score_b)
        return {"status": status, "assignment_id": assignment_id, "upload_id": body.upload_id}

    @app.get("/v1/leaderboard", dependencies=[Depends(reader)])
    def leaderboard_json() -> dict[str, Any]:
        return board.get()

    # the pages load matplotlib (through the report's templates and colours, about 1 s): on the
    # first page served, not when the hub starts
    @app.get("/leaderboard", response_class=HTMLResponse)
    def leaderboard_page(request: Request) -> HTMLResponse:
        from .page import render_login, render_page

        if not settings.public_leaderboard:
            header = request.headers.get("authorization")
            token = header.removeprefix("Bearer ").strip() if header else request.cookies.get(COOKIE)
            try:
                viewer(store.authenticate(token), "the leaderboard")
            except HubError as err:
                error = "" if token is None else f"that key was refused: {err}"
                return HTMLResponse(render_login(error=error), status_code=err.status)
        return HTMLResponse(render_page(board.get()))

    @app.post("/leaderboard/login", response_class=HTMLResponse)
    async def leaderboard_login(request: Request) -> Response:
        from .page import COOKIE_DAYS, render_login

        form = urllib.parse.parse_qs((await request.body()).decode("utf-8", "replace"))
        key = (form.get("key") or [""])[0].strip()
        try:
            viewer(await asyncio.to_thread(store.authenticate, key or None), "the leaderboard")
        except HubError as err:
            return HTMLResponse(render_login(error=f"that key was refused: {err}"), status_code=err.status)
        done = RedirectResponse("/leaderboard", status_code=303)
        done.set_cookie(COOKIE, key, max_age=COOKIE_DAYS * 86400, path="/leaderboard", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
        return done

    @app.get("/v1/journal")
    def journal(who: Annotated[tuple[str, str], Depends(caller)], after: int = 0) -> list[dict[str, Any]]:
        viewer(who, "the journal")
        return [e.to_dict() for e in store.journal(after=after)]

    @app.get("/v1/status", dependencies=[Depends(caller)])
    def status() -> dict[str, int]:
        return store.counts()

    return _with_body_limit(app, settings.max_body)


def _with_body_limit(app: FastAPI, limit: int) -> FastAPI:
    app.add_middleware(BodyLimit, limit=limit)
    return app
